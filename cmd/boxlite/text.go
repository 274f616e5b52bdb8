package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/boxlite/boxlite/internal/safetext"
)

// Text from a box (a guest's messages, an image's or an archive's names)
// reaches this terminal only through safetext: errors and tables have its
// control characters replaced, JSON has them escaped. A command's own
// output (run, exec) is passed through as it is: it is what was asked for.

// printErr prints err on stderr, one "boxlite: " message, its control
// characters taken out (it may quote a guest's console or agent).
func printErr(err error) {
	fmt.Fprintf(os.Stderr, "boxlite: %s\n", safetext.Text(err.Error()))
}

// printJSON prints v as indented JSON on stdout, with every character
// safetext would take out escaped as \uXXXX (encoding/json leaves DEL, the
// C1 controls and the bidirectional ones as they are), so that a decoder
// gets the value as it is and a terminal sees no control character.
func printJSON(v any) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		printErr(err)
		return
	}
	fmt.Println(escapeJSON(string(out)))
}

// escapeJSON escapes the characters safetext.Unsafe names; in JSON text
// they can only be inside strings, where \uXXXX means them.
func escapeJSON(s string) string {
	if strings.IndexFunc(s, safetext.Unsafe) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if safetext.Unsafe(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
