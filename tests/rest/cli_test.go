package rest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite/internal/cmdrun"
)

// cliRun runs the CLI with a client home of its own (not the server's: a
// command that ran locally would leave its box there), stdin and env, and
// returns its stdout, stderr and exit code, within three minutes.
func cliRun(t *testing.T, clientHome, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	full := append(append(os.Environ(), "BOXLITE_HOME="+clientHome, "BOXLITE_REST_URL=", "BOXLITE_API_KEY="), env...)
	return cmdrun.Cmd{Env: full, Stdin: stdin, Timeout: 3 * time.Minute}.Run(t, filepath.Join(repo, "build", "boxlite"), args...)
}

// TestCLIOverURL drives the CLI against the server: auth login (a refused
// key saves nothing), status, then with the saved profile and with --url
// and BOXLITE_API_KEY the box commands, a local-only command refused, and
// logout.
func TestCLIOverURL(t *testing.T) {
	clientHome := t.TempDir()
	cred := filepath.Join(clientHome, "credentials.toml")
	must := func(stdin string, env []string, args ...string) string {
		t.Helper()
		out, errOut, code := cliRun(t, clientHome, stdin, env, args...)
		if code != 0 {
			t.Fatalf("boxlite %q: exit %d: %s%s", args, code, out, errOut)
		}
		return out
	}

	// A refused key: an error, and nothing saved.
	if out, errOut, code := cliRun(t, clientHome, "not-a-key\n", nil, "auth", "login", "--url", srv.url, "--api-key-stdin"); code == 0 {
		t.Fatalf("login with a wrong key succeeded: %s %s", out, errOut)
	} else if !strings.Contains(errOut, "nothing saved") {
		t.Errorf("login with a wrong key: %q", errOut)
	}
	if _, err := os.Stat(cred); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused key left %s: %v", cred, err)
	}

	out := must(key+"\n", nil, "auth", "login", "--url", srv.url, "--api-key-stdin")
	if !strings.Contains(out, "as tests") || strings.Contains(out, key) {
		t.Errorf("login: %q", out)
	}
	st, err := os.Stat(cred)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v, want mode 0600", st, err)
	}
	data, _ := os.ReadFile(cred)
	if !strings.Contains(string(data), "[profiles.default]") || !strings.Contains(string(data), srv.url) {
		t.Errorf("credentials file: %s", data)
	}
	out = must("", nil, "auth", "status")
	if !strings.Contains(out, srv.url) || !strings.Contains(out, "Key: tests") || strings.Contains(out, key) {
		t.Errorf("status: %q", out)
	}

	// With the saved profile.
	prof := []string{"--profile", "default"}
	id := strings.TrimSpace(must("", nil, append(prof, "create", "--name", "cli-url", "--memory", "256", "alpine:latest")...))
	if len(id) != 12 {
		t.Fatalf("create printed %q", id)
	}
	if out := must("", nil, append(prof, "ls", "-a")...); !strings.Contains(out, id) || !strings.Contains(out, "cli-url") {
		t.Errorf("ls: %q", out)
	}

	// With --url and BOXLITE_API_KEY.
	url := []string{"--url", srv.url}
	env := []string{"BOXLITE_API_KEY=" + key}
	out, errOut, code := cliRun(t, clientHome, "", env, append(url, "exec", "cli-url", "--", "sh", "-c", "echo out; echo err >&2; exit 3")...)
	if out != "out\n" || errOut != "err\n" || code != 3 {
		t.Errorf("exec: %q %q exit %d, want out, err, 3", out, errOut, code)
	}
	if out, errOut, code := cliRun(t, clientHome, "hello stdin", env, append(url, "exec", "-i", "cli-url", "cat")...); out != "hello stdin" || code != 0 {
		t.Errorf("exec -i: %q %q exit %d", out, errOut, code)
	}
	if _, errOut, code := cliRun(t, clientHome, "", env, append(url, "exec", "cli-url", "no-such-command")...); code != 127 {
		t.Errorf("exec of a missing command: exit %d (%s), want 127", code, errOut)
	}
	if _, errOut, code := cliRun(t, clientHome, "", env, append(url, "exec", "--timeout", "1", "cli-url", "sleep", "60")...); code != 124 {
		t.Errorf("exec past --timeout: exit %d (%s), want 124", code, errOut)
	}

	// cp in and out.
	dir := t.TempDir()
	src, back := filepath.Join(dir, "in.txt"), filepath.Join(dir, "back.txt")
	if err := os.WriteFile(src, []byte("copied over REST\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must("", env, append(url, "cp", src, "cli-url:/tmp/in.txt")...)
	if out := must("", env, append(url, "exec", "cli-url", "cat", "/tmp/in.txt")...); out != "copied over REST\n" {
		t.Errorf("cp in: the box has %q", out)
	}
	must("", env, append(url, "cp", "cli-url:/tmp/in.txt", back)...)
	if got, err := os.ReadFile(back); err != nil || string(got) != "copied over REST\n" {
		t.Errorf("cp out: %q %v", got, err)
	}

	// run --rm: the output, and no box left behind.
	before := must("", env, append(url, "ls", "-a")...)
	if out := must("", env, append(url, "run", "--rm", "--memory", "256", "alpine:latest", "--", "echo", "ran")...); out != "ran\n" {
		t.Errorf("run --rm: %q", out)
	}
	if after := must("", env, append(url, "ls", "-a")...); strings.Count(after, "\n") != strings.Count(before, "\n") {
		t.Errorf("run --rm left a box:\n%s\nbefore:\n%s", after, before)
	}

	// A command of the server's host only: a typed error, nothing run here.
	if _, errOut, code := cliRun(t, clientHome, "", env, append(url, "logs", "cli-url")...); code != 125 || !strings.Contains(errOut, "logs is not available over --url") {
		t.Errorf("logs over --url: exit %d %q", code, errOut)
	}
	if _, errOut, code := cliRun(t, clientHome, "", env, append(url, "image", "rm", "alpine:latest")...); code != 125 || !strings.Contains(errOut, "image rm is not available over --url") {
		t.Errorf("image rm over --url: exit %d %q", code, errOut)
	}

	// restart, image ls, run -d (its command in the box's background).
	must("", env, append(url, "restart", "cli-url")...)
	if out := must("", env, append(url, "image", "ls")...); !strings.Contains(out, "alpine") {
		t.Errorf("image ls: %q", out)
	}
	bg := strings.TrimSpace(must("", env, append(url, "run", "-d", "--name", "cli-bg", "--memory", "256", "alpine:latest", "--", "sh", "-c", "echo bg > /tmp/bg")...))
	if len(bg) != 12 {
		t.Errorf("run -d printed %q", bg)
	}
	if out := must("", env, append(url, "exec", "cli-bg", "sh", "-c", "for i in $(seq 50); do [ -s /tmp/bg ] && break; sleep 0.1; done; cat /tmp/bg")...); out != "bg\n" {
		t.Errorf("run -d's command: %q", out)
	}
	must("", env, append(url, "rm", "-f", "cli-bg")...)

	must("", env, append(url, "stop", "cli-url")...)
	if out := must("", env, append(url, "info", "cli-url")...); !strings.Contains(out, `"state": "stopped"`) {
		t.Errorf("info after stop: %s", out)
	}
	must("", env, append(url, "rm", "cli-url")...)
	if out := must("", env, append(url, "ls", "-a")...); strings.Contains(out, id) {
		t.Errorf("ls after rm: %q", out)
	}
	// Nothing ran on this side: the client home has no box.
	if out := must("", nil, "ls", "-a"); strings.Count(out, "\n") != 1 {
		t.Errorf("the client's own home has boxes:\n%s", out)
	}

	out = must("", nil, "auth", "logout")
	if !strings.Contains(out, "removed") {
		t.Errorf("logout: %q", out)
	}
	if _, err := os.Stat(cred); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("logout left %s: %v", cred, err)
	}
	if _, _, code := cliRun(t, clientHome, "", nil, "auth", "status"); code == 0 {
		t.Errorf("status after logout succeeded")
	}
	if _, errOut, code := cliRun(t, clientHome, "", nil, append(prof, "ls")...); code == 0 || !strings.Contains(errOut, "no profile") {
		t.Errorf("ls with a removed profile: exit %d %q", code, errOut)
	}
}
