package restapi

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// Records load back; a running one whose box is gone is reported lost (a
// status, not a failure) and its record dropped; an ended one keeps its
// state; files that are not records are removed.
func TestExecRecordsAcrossARestart(t *testing.T) {
	home := t.TempDir()
	rt, err := boxlite.NewRuntime(boxlite.WithHome(home))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	state := t.TempDir()
	var logged []string
	store, err := openExecStore(state, func(f string, a ...any) { logged = append(logged, f) })
	if err != nil {
		t.Fatal(err)
	}
	code := 3
	started := time.Now().Add(-time.Minute)
	store.save(execRecord{ID: "exec-aa", BoxID: "nobox", Key: "k", AgentID: "0123456789ab", Command: commandSummary([]string{"sh", "-c", "secret"}), Started: started})
	store.save(execRecord{ID: "exec-bb", BoxID: "nobox", Key: "k", AgentID: "0123456789ac", Started: started,
		Final: &wire.ExecutionInfo{ExecutionID: "exec-bb", Status: "completed", ExitCode: &code}})
	for _, junk := range []string{"../x.json", "x y.json", "notes.txt"} {
		os.WriteFile(filepath.Join(state, execDir, filepath.Base(junk)), []byte("{}"), 0o600)
	}
	os.WriteFile(filepath.Join(state, execDir, "exec-cc.json"), []byte("{not json"), 0o600)
	data, _ := os.ReadFile(filepath.Join(state, execDir, "exec-aa.json"))
	if strings.Contains(string(data), "secret") || !strings.Contains(string(data), `"command":"sh (+2 args)"`) {
		t.Fatalf("record: %s", data)
	}

	g := newRegistry(Limits{}.withDefaults(), store)
	g.restore(rt)
	lost, err := g.get("nobox", "exec-aa")
	if err != nil {
		t.Fatal(err)
	}
	if in := lost.info(); in.Status != "lost" || in.ErrorMessage == nil || !strings.Contains(*in.ErrorMessage, "restarted") {
		t.Fatalf("lost: %+v", in)
	}
	if !lost.isEnded() {
		t.Fatal("a lost execution is not ended")
	}
	lost.kill() // no process: nothing to do, no panic
	if err := lost.signal(15); err == nil {
		t.Fatal("signal to a lost execution succeeded")
	}
	ended, err := g.get("nobox", "exec-bb")
	if err != nil {
		t.Fatal(err)
	}
	if in := ended.info(); in.Status != "completed" || in.ExitCode == nil || *in.ExitCode != 3 {
		t.Fatalf("ended: %+v", in)
	}
	ents, _ := os.ReadDir(filepath.Join(state, execDir))
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	sort.Strings(left)
	if strings.Join(left, " ") != "exec-bb.json" {
		t.Fatalf("left in the store: %v", left)
	}
	if len(logged) == 0 {
		t.Fatal("nothing logged about the lost execution")
	}
	g.evict(ended)
	if _, err := os.Stat(filepath.Join(state, execDir, "exec-bb.json")); !os.IsNotExist(err) {
		t.Fatalf("evicted execution's record: %v", err)
	}
}
