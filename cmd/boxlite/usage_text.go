package main

// sections are the usage, a section per command (help prints one).
var sections = []section{
	{[]string{"run"}, `  run [--rm] [-d] [--name N] [--memory MIB] [--cpus N] [--disk-size GB] [-e K=V]... [-w DIR]
      [-u USER] [-v HOST:GUEST[:ro|:rw][,size=N]]... [--timeout SECONDS] [-i] [-t]
      [--network enabled|disabled]
      [--allow-net ENTRY[,ENTRY]]... [-p [[IP:]HOST:]GUEST[/udp]]... [--entrypoint EXEC]
      [--secret NAME=VALUE@HOST[,HOST]]... [--cap-add CAP]... [--cap-drop CAP]...
      [--security development|standard|maximum] [--health-cmd CMD [--health-interval S]
      [--health-timeout S] [--health-retries N] [--health-start-period S]]
      IMAGE [-- CMD [ARGS...]]
                    boot a box from IMAGE, run CMD (default: the image's entrypoint
                    and cmd), stream its output and exit with its exit code;
                    -d boots a detached box instead, starts CMD (if any) in its
                    background with its output discarded, and prints the box id;
                    -i forwards stdin, -t gives CMD a terminal (-it: an interactive
                    shell, with this terminal in raw mode and its size followed);
                    --network disabled leaves the box only lo; --allow-net limits
                    where it may connect (names, *.wildcards, IPs, CIDRs, :port);
                    -p publishes GUEST on the host (IP 127.0.0.1; HOST 0 or none
                    picks a free port, printed on stderr); the box reaches the
                    host's 127.0.0.1 as host.boxlite.internal
                    -v mounts a host folder or file in the box (:ro read-only;
                    size=N, e.g. :rw,size=1g, stops the box when it stores more)
                    --secret: the box sees $BOXLITE_SECRET_<NAME>, a placeholder
                    the host replaces with VALUE in HTTPS requests to HOST
                    (name, *.wildcard, :port; default 443); NAME@HOST takes
                    VALUE from $NAME (docs/secrets.md)
                    --cap-add/--cap-drop change the capabilities of the box's
                    processes, --security picks an isolation preset, --health-cmd
                    runs a check in the box (inspect's health_status says how it
                    went): docs/security-options.md
`},
	{[]string{"create"}, `  create [--rm] [-e K=V]... [-w DIR] [-u USER] [box options as run] IMAGE [CMD [ARGS...]]
                    register a box without booting it and print its id; CMD
                    replaces the image's cmd; the box is detached (as docker's):
                    started, it outlives this command
`},
	{[]string{"start"}, `  start BOX...      boot configured or stopped detached boxes (as create makes; a
                    running one is left as is)
`},
	{[]string{"stats"}, `  stats [--json] [--no-stream] [BOX...]
                    print the metrics of running boxes (default: all) once: CPU %
                    and memory of the VMM, execs and those that failed to start,
                    the network's bytes; --json prints every metric
`},
	{[]string{"stop"}, `  stop BOX...       stop boxes (their disks are kept)
`},
	{[]string{"restart"}, `  restart BOX...    stop, then start detached boxes
`},
	{[]string{"pause"}, `  pause BOX...      save running boxes (memory and devices) into their directories
                    and end their processes: a paused box holds no process and no
                    memory; exec, cp, resume or start bring it back as it was
                    (boxes with volumes cannot pause); stop drops the saved state
`},
	{[]string{"resume"}, `  resume BOX...     restore paused detached boxes (a state saved by another QEMU,
                    kernel or machine shape is refused: the box is then stopped)
`},
	{[]string{"exec"}, `  exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] [--timeout S] BOX [--] CMD [ARGS...]
                    run CMD in a box (a configured or stopped one is started
                    first) and exit with its exit code (128+N for signal N)
`},
	{[]string{"ls", "ps"}, `  ls, ps [-a] [-q]  list the running (and paused) boxes, as docker ps; -a: all
                    boxes, configured and stopped too; -q: only their ids
`},
	{[]string{"info", "inspect"}, `  info, inspect BOX describe a box as JSON (state, acceleration and why, boot timings)
`},
	{[]string{"logs"}, `  logs [-f] BOX     print the box's shim log and guest console; -f follows them
                    until the box stops or ^C
`},
	{[]string{"rm"}, `  rm [-f] BOX...    remove boxes; -f stops running ones first
`},
	{[]string{"cp"}, `  cp [-L] [--no-overwrite] SRC DST
                    copy files between the host and a box, as docker cp
                    does: BOX:PATH on one side (-L follows a symlink named as SRC)
`},
	{[]string{"snapshot"}, `  snapshot create [--memory] BOX [NAME] | ls BOX | rm BOX NAME | restore BOX NAME
                    snapshots of a box's disk, running or not (kept with the box);
                    --memory keeps a running or paused box's memory too;
                    restore (the box not running) replaces the disk, and with
                    memory leaves the box paused at the snapshot's instant
`},
	{[]string{"clone"}, `  clone [--name N] [--snapshot S] BOX
                    a stopped copy of a stopped box (or of one of its snapshots;
                    of a memory snapshot: a paused fork of that instant)
`},
	{[]string{"fork"}, `  fork [-n N] [--name N]... BOX
                    running copies of a running box at this instant (its memory,
                    processes and disk); each its own machine (hostname,
                    entropy, network, host ports); the box runs on
`},
	{[]string{"export"}, `  export BOX FILE|DIR
                    write a stopped box (config, disk, image) to one archive
`},
	{[]string{"import"}, `  import [--name N] [--rm] [box options as run: --memory, --cpus, --disk-size, --network,
      --allow-net, -p, -v, --entrypoint] FILE
                    make a stopped, detached box from an archive; it needs no
                    registry. The box is new: of the archive's config it keeps
                    the image, env, entrypoint and cmd, user and working
                    directory; memory, CPUs, disk size (the archive's disk must
                    fit), network, published ports, kernel arguments and boot
                    timeout are these options' or the defaults
`},
	{[]string{"pull"}, `  pull IMAGE        fetch IMAGE from its registry (or a mirror) into the store
`},
	{[]string{"image"}, `  image load PATH   import an OCI layout directory or a docker-archive tar
  image ls          list images
  image rm IMAGE... remove image names (a box keeps the image it uses)
  image prune [-a]  remove unnamed images (-a: all images) that no box uses, and
                    the blobs and layers nothing needs
`},
	{[]string{"version"}, `  version, --version
                    print boxlite's version
`},
	{[]string{"help"}, `  help [COMMAND]    this help, or COMMAND's (as COMMAND --help)
`},
	{[]string{"serve"}, `
  serve [--listen HOST:PORT] [--tls-cert F --tls-key F] [--insecure-no-tls] [--keys FILE]
      [--access-log FILE] [--max-boxes-per-key N] [--max-memory-mib-per-key N]
      [--max-execs-per-key N] [--max-transfer-bytes N]
                    serve BoxLite's REST API (default 127.0.0.1:8100, under /v1;
                    schema at /v1/openapi.json) over this home until SIGINT or
                    SIGTERM; every request but /v1/config, /v1/openapi.json and
                    /healthz needs Authorization: Bearer KEY; a listen beyond
                    loopback needs TLS (or --insecure-no-tls)
  serve key create [--keys FILE] [--name N] | ls [--keys FILE] | rm [--keys FILE] NAME
                    make a key (printed once; only its hash is kept), list, revoke
`},
	{[]string{"auth"}, `  auth login [--profile N] [--url URL] [--api-key-stdin]
                    check a key (prompted, or one line on stdin) with the server and
                    save it in $BOXLITE_HOME/credentials.toml (mode 0600)
  auth logout [--profile N] | status [--profile N]
                    remove a profile; show its url and key name (never the key)
`},
}

// remoteText precedes the auth section: how commands run on a server.
const remoteText = `
run and create pull IMAGE when it is not in the store; one in the store is used as it is.
Exit codes of run and exec: the command's own; 124 when --timeout killed it; 125 when
boxlite failed (of every command: a bad flag or argument too, said in one line); 127
when the command was not found. BOXLITE_HOME sets the home (~/.boxlite).
Registries: credentials from the docker config (docker login); BOXLITE_REGISTRY_MIRRORS
(docker.io=http://127.0.0.1:5000,...), BOXLITE_INSECURE_REGISTRIES (host:port,...).

A server (boxlite serve): --url URL (or BOXLITE_REST_URL) or --profile NAME, before the
command, runs ls/ps, info, create, start, stop, restart, rm, exec, run, cp, pull and image ls
there (any other command fails); the key is BOXLITE_API_KEY, else the profile's (--profile's,
or "default"'s when saved for that url).
`
