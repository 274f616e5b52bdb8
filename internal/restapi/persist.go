package restapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/boxlite/boxlite"
	"github.com/boxlite/boxlite/errdefs"
	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// Executions survive a restart of the server: every one it starts is
// detachable (boxlite.Command.Detachable), and its record is a small JSON
// file in StateDir/executions, written when it starts and when it ends,
// removed when it is forgotten. A new server loads the records: it
// attaches again to each execution whose box still runs it, and reports
// the others as lost.
const execDir = "executions"

// attachTimeout bounds the reattach of one execution at startup.
const attachTimeout = 30 * time.Second

// execRecord is what the server keeps of an execution across restarts. It
// holds no secrets: the command is its program's name and how many
// arguments it had; no arguments, environment or output.
type execRecord struct {
	ID      string    `json:"id"`
	BoxID   string    `json:"box_id"`
	Key     string    `json:"key"`
	AgentID string    `json:"agent_exec_id"` // boxlite.Execution.ID: what AttachExec takes
	Command string    `json:"command"`
	TTY     bool      `json:"tty,omitempty"`
	Started time.Time `json:"started"`
	// Final is the execution's state once it ended.
	Final *wire.ExecutionInfo `json:"final,omitempty"`
}

// commandSummary names a command without its arguments, which may hold
// secrets.
func commandSummary(argv []string) string {
	name := argv[0]
	if len(name) > 128 {
		name = name[:128] + "..."
	}
	return fmt.Sprintf("%s (+%d args)", name, len(argv)-1)
}

// execStore keeps the records; a nil store keeps nothing.
type execStore struct {
	dir  string
	logf func(format string, args ...any)
}

func openExecStore(stateDir string, logf func(string, ...any)) (*execStore, error) {
	dir := filepath.Join(stateDir, execDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &execStore{dir: dir, logf: logf}, nil
}

// path is the record file of id, which must be an idPattern id.
func (s *execStore) path(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", errdefs.Errorf(errdefs.ErrInvalidArgument, "execution id %q", truncate(id))
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// save writes rec through a temporary file and a rename.
func (s *execStore) save(rec execRecord) {
	p, err := s.path(rec.ID)
	if err == nil {
		var data []byte
		if data, err = json.Marshal(rec); err == nil {
			tmp := p + ".tmp"
			if err = os.WriteFile(tmp, data, 0o600); err == nil {
				err = os.Rename(tmp, p)
			}
		}
	}
	if err != nil {
		s.logf("execution %s: record not saved (it will not survive a restart): %v", rec.ID, err)
	}
}

func (s *execStore) remove(id string) {
	if p, err := s.path(id); err == nil {
		_ = os.Remove(p)
	}
}

// load reads every record; files that are not records are removed.
func (s *execStore) load() []execRecord {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		s.logf("executions: %v", err)
		return nil
	}
	var out []execRecord
	for _, ent := range ents {
		id, ok := strings.CutSuffix(ent.Name(), ".json")
		p, perr := s.path(id)
		if !ok || perr != nil || !ent.Type().IsRegular() {
			_ = os.RemoveAll(filepath.Join(s.dir, ent.Name()))
			continue
		}
		var rec execRecord
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err == nil && (rec.ID != id || !idPattern.MatchString(rec.BoxID) || rec.AgentID == "") {
			err = errors.New("inconsistent record")
		}
		if err != nil {
			s.logf("execution %s: record unreadable, dropped: %v", id, err)
			_ = os.Remove(p)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// restore re-registers the executions of the records: an ended one as it
// ended; a running one attached again (boxlite.Box.AttachExec), so that
// attach, output, status, signal and kill work as before the restart; one
// whose box is gone or whose box no longer knows it as lost, with why.
func (g *registry) restore(rt *boxlite.Runtime) {
	recs := g.store.load()
	resumed, lost := 0, 0
	for _, rec := range recs {
		e := &execution{id: rec.ID, boxID: rec.BoxID, key: rec.Key, agentID: rec.AgentID, command: rec.Command, tty: rec.TTY,
			started: rec.Started, exited: make(chan struct{}), kick: make(chan struct{}), stop: g.stop}
		e.idle = time.Now()
		switch {
		case rec.Final != nil:
			e.final = rec.Final
			e.ended = time.Now() // retained a full ExecRetention after the restart
			close(e.exited)
		default:
			if err := e.reattach(rt); err != nil {
				lost++
				g.store.logf("execution %s (%s, box %s): lost across the restart: %v", rec.ID, rec.Command, rec.BoxID, err)
				msg := "lost when boxlite serve restarted: " + err.Error()
				e.final = &wire.ExecutionInfo{ExecutionID: rec.ID, Status: "lost", StartedAt: rec.Started.UTC().Format(time.RFC3339Nano), ErrorMessage: &msg}
				e.ended = time.Now()
				close(e.exited)
				g.store.remove(rec.ID)
			} else {
				resumed++
			}
		}
		g.mu.Lock()
		g.m[e.id] = e
		g.mu.Unlock()
		if e.x != nil {
			e.start(g.store)
		}
	}
	if len(recs) > 0 {
		g.store.logf("executions: %d reattached, %d ended before, %d lost", resumed, len(recs)-resumed-lost, lost)
	}
}

// reattach finds the execution's box and attaches to the process.
func (e *execution) reattach(rt *boxlite.Runtime) error {
	ctx, cancel := context.WithTimeout(context.Background(), attachTimeout)
	defer cancel()
	b, err := rt.Get(ctx, e.boxID)
	if err != nil {
		return fmt.Errorf("box: %w", err)
	}
	x, err := b.AttachExec(ctx, e.agentID)
	if err != nil {
		return err
	}
	e.x = x
	return nil
}

// record is e's record as the store keeps it.
func (e *execution) record() execRecord {
	return execRecord{ID: e.id, BoxID: e.boxID, Key: e.key, AgentID: e.agentID, Command: e.command, TTY: e.tty, Started: e.started}
}
