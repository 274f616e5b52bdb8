package boxlite

import (
	"cmp"
	"strings"

	"github.com/boxlite/boxlite/internal/protocol"
	"github.com/boxlite/boxlite/internal/session"
)

// Prestarted sessions (WithPrestart): the template VM of a box's shape
// parks the processes of the sessions the box asked for (protocol.TPark),
// and the agent hands one to the first exec whose request is exactly the
// parked one. So the requests here must be the ones the sessions send.

// parkRequests are the requests of the sessions cfg.Prestart names, as a
// session with default options sends them (Config.Park: each with its
// alternatives). A box with its own env, cwd or user has none: those are
// in every request, and the template's shape would be the box's own.
func (b *Box) parkRequests(cfg BoxConfig) [][]protocol.Exec {
	if len(cfg.Env) > 0 || cfg.WorkingDir != "" || cfg.User != "" {
		return nil
	}
	var park [][]protocol.Exec
	for _, k := range cfg.Prestart {
		var argvs [][]string
		if kind, shell, _ := strings.Cut(k, ":"); kind == PrestartPython {
			for _, py := range session.DefaultPythons {
				argvs = append(argvs, session.PythonArgv(py))
			}
		} else {
			argvs = append(argvs, []string{cmp.Or(shell, session.DefaultShell)})
		}
		var alts []protocol.Exec
		for _, argv := range argvs {
			req, err := b.request(Command{Argv: argv, Stdin: true})
			if err != nil {
				return nil // the exec would fail alike
			}
			alts = append(alts, req)
		}
		park = append(park, alts)
	}
	return park
}
