// Package readme gives tests the code snippets of the repository's README,
// so that the quick starts users copy are the programs the tests run.
package readme

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Path is the README's path in this checkout.
func Path() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "README.md")
}

// Snippet is the first fenced code block of language lang (```lang) in the
// README section whose heading is heading ("## From Go").
func Snippet(heading, lang string) (string, error) {
	b, err := os.ReadFile(Path())
	if err != nil {
		return "", err
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		return "", fmt.Errorf("README.md has no section %q", heading)
	}
	section := text[i+len(heading)+2:]
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	fence := "\n```" + lang + "\n"
	start := strings.Index(section, fence)
	if start < 0 {
		return "", fmt.Errorf("README.md's %q has no ```%s block", heading, lang)
	}
	body := section[start+len(fence):]
	end := strings.Index(body, "\n```")
	if end < 0 {
		return "", fmt.Errorf("README.md's %q: ```%s block not closed", heading, lang)
	}
	return body[:end+1], nil
}
