package boxlite

import (
	"fmt"
	"maps"
	"slices"
)

// importer is what the caller of ImportBox chose for the new box.
type importer struct {
	name string      // the new box's name ("" : unnamed)
	opts []BoxOption // the importer's box options
}

// config is the new box's config, made from an archived one: an imported
// box is a new box, not a trusted copy of the exported one. Of the archived
// config it keeps only what describes the box's content, checked as Create
// checks it: the image reference, env, entrypoint and cmd, user and working
// directory. Everything that decides what the box may do to its host, or
// how long its start may take, comes from the importer's options, else
// Create's defaults: memory, CPUs, disk size, network mode and allow-list,
// published ports, kernel arguments, boot timeout, hostname, prestarted
// sessions, detach and auto-remove (and volumes, which an archive never has).
// The importer's options are applied after the content, so they may change
// it too (WithEnv adds to the archived env).
func (imp importer) config(archived BoxConfig) (BoxConfig, error) {
	cfg := defaultBoxConfig(archived.Image)
	cfg.Env = maps.Clone(archived.Env)
	cfg.Entrypoint, cfg.Cmd = slices.Clone(archived.Entrypoint), slices.Clone(archived.Cmd)
	cfg.User, cfg.WorkingDir = archived.User, archived.WorkingDir
	content := cfg
	if err := content.validate(); err != nil {
		return cfg, fmt.Errorf("archive: %w", err)
	}
	for _, opt := range imp.opts {
		if err := opt(&cfg); err != nil {
			return cfg, fmt.Errorf("import options: %w", err)
		}
	}
	if imp.name != "" {
		cfg.Name = imp.name
	}
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("import options: %w", err)
	}
	if err := checkHostMemory(cfg); err != nil { // as Create refuses it
		return cfg, fmt.Errorf("import options: %w", err)
	}
	return cfg, nil
}

// check checks the importer's options on their own, before an archive is read.
func (imp importer) check() error {
	_, err := imp.config(BoxConfig{Image: "scratch"})
	return err
}
