package restapi

import (
	"net/http"
	"reflect"

	"github.com/boxlite/boxlite/internal/restapi/wire"
)

// route is one operation of the API: the mux serves it, and the OpenAPI
// document describes it, from this one entry.
type route struct {
	method, path string // path under /v1, in OpenAPI's {param} form
	id, summary  string
	tag          string
	query        []param
	body         reflect.Type // a JSON body's type; nil: none or raw
	bodyRaw      string       // a raw body's media type
	bodyOptional bool
	status       int          // success
	resp         reflect.Type // a JSON answer's type; nil: none or raw
	respRaw      string       // a raw answer's media type
	errors       []int
	public       bool // no key needed
	stream       bool // no request deadline (WebSocket, transfers)
	idempotent   bool // takes an Idempotency-Key (idempotency.go)
	handle       func(a *API, w http.ResponseWriter, r *http.Request) error
}

// param is a query parameter.
type param struct {
	name, typ, doc string
	required       bool
}

func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

var (
	pageParams = []param{{"pageSize", "integer", "Results per page (1-1000, default 100)", false}, {"pageToken", "string", "The next_page_token of the previous page", false}}
	boxErrors  = []int{400, 401, 404, 409}
)

// routes is the API (set in init: the OpenAPI route reads the table).
var routes []route

func init() { routes = routeTable() }

// routeTable is the API. Cloud-only operations answer 501 (notServed).
func routeTable() []route {
	return []route{
		{method: "GET", path: "/config", id: "getConfig", summary: "Server defaults, limits and features", tag: "Configuration",
			status: 200, resp: typ[wire.ServerConfig](), public: true, handle: (*API).getConfig},
		{method: "GET", path: "/openapi.json", id: "getOpenAPI", summary: "This document", tag: "Configuration",
			status: 200, respRaw: "application/json", public: true, handle: (*API).getOpenAPI},
		{method: "GET", path: "/me", id: "getCurrentPrincipal", summary: "The calling key", tag: "Authentication",
			status: 200, resp: typ[wire.Principal](), errors: []int{401}, handle: (*API).getMe},

		{method: "POST", path: "/boxes", id: "createBox", idempotent: true, summary: "Create a box (configured; it starts on start or its first exec)", tag: "Boxes",
			body: typ[wire.CreateBoxRequest](), status: 201, resp: typ[wire.Box](), errors: []int{400, 401, 409, 429, 501}, handle: (*API).createBox},
		{method: "GET", path: "/boxes", id: "listBoxes", summary: "List boxes", tag: "Boxes",
			query: append([]param{{"status", "string", "Only boxes in this status", false}}, pageParams...), status: 200, resp: typ[wire.ListBoxesResponse](), errors: []int{400, 401}, handle: (*API).listBoxes},
		{method: "GET", path: "/boxes/{box_id}", id: "getBox", summary: "A box, by id or name", tag: "Boxes",
			status: 200, resp: typ[wire.Box](), errors: []int{400, 401, 404}, handle: (*API).getBoxInfo},
		{method: "HEAD", path: "/boxes/{box_id}", id: "boxExists", summary: "Whether a box exists", tag: "Boxes",
			status: 204, errors: []int{401, 404}, handle: (*API).headBox},
		{method: "DELETE", path: "/boxes/{box_id}", id: "removeBox", idempotent: true, summary: "Remove a box and its disk", tag: "Boxes",
			query: []param{{"force", "boolean", "Stop a running box first", false}}, status: 204, errors: boxErrors, handle: (*API).removeBox},
		{method: "POST", path: "/boxes/{box_id}/start", id: "startBox", idempotent: true, summary: "Start a box", tag: "Boxes",
			status: 200, resp: typ[wire.Box](), errors: boxErrors, handle: (*API).startBox},
		{method: "POST", path: "/boxes/{box_id}/stop", id: "stopBox", idempotent: true, summary: "Stop a box", tag: "Boxes",
			body: typ[wire.StopBoxRequest](), bodyOptional: true, status: 200, resp: typ[wire.Box](), errors: boxErrors, handle: (*API).stopBox},

		{method: "POST", path: "/boxes/{box_id}/pause", id: "pauseBox", idempotent: true, summary: "Pause a running box with its memory (boxlite's)", tag: "Boxes",
			status: 200, resp: typ[wire.PauseResponse](), errors: []int{400, 401, 404, 409, 413}, handle: (*API).pauseBox},
		{method: "POST", path: "/boxes/{box_id}/resume", id: "resumeBox", idempotent: true, summary: "Resume a paused box (boxlite's)", tag: "Boxes",
			status: 200, resp: typ[wire.Box](), errors: boxErrors, handle: (*API).resumeBox},
		{method: "POST", path: "/boxes/{box_id}/fork", id: "forkBox", summary: "Running copies of a running box at one instant (boxlite's)", tag: "Boxes",
			body: typ[wire.ForkBoxRequest](), bodyOptional: true, status: 201, resp: typ[wire.ForkBoxResponse](), errors: []int{400, 401, 404, 409, 429}, handle: (*API).forkBox},
		{method: "POST", path: "/boxes/{box_id}/snapshots", id: "createSnapshot", summary: "Snapshot a box's disk (and memory: boxlite's)", tag: "Boxes",
			body: typ[wire.CreateSnapshotRequest](), status: 201, resp: typ[wire.Snapshot](), errors: boxErrors, handle: (*API).createSnapshot},
		{method: "GET", path: "/boxes/{box_id}/snapshots", id: "listSnapshots", summary: "A box's snapshots", tag: "Boxes",
			status: 200, resp: typ[wire.ListSnapshotsResponse](), errors: []int{400, 401, 404}, handle: (*API).listSnapshots},
		{method: "GET", path: "/boxes/{box_id}/snapshots/{snapshot_name}", id: "getSnapshot", summary: "One snapshot", tag: "Boxes",
			status: 200, resp: typ[wire.Snapshot](), errors: []int{400, 401, 404}, handle: (*API).getSnapshot},
		{method: "DELETE", path: "/boxes/{box_id}/snapshots/{snapshot_name}", id: "removeSnapshot", summary: "Remove a snapshot", tag: "Boxes",
			status: 204, errors: boxErrors, handle: (*API).removeSnapshot},
		{method: "POST", path: "/boxes/{box_id}/snapshots/{snapshot_name}/restore", id: "restoreSnapshot", summary: "Restore a stopped box's disk", tag: "Boxes",
			status: 204, errors: boxErrors, handle: (*API).restoreSnapshot},
		{method: "POST", path: "/boxes/{box_id}/clone", id: "cloneBox", summary: "Clone a stopped box", tag: "Boxes",
			body: typ[wire.CloneBoxRequest](), bodyOptional: true, status: 201, resp: typ[wire.Box](), errors: []int{400, 401, 404, 409, 429}, handle: (*API).cloneBox},
		{method: "POST", path: "/boxes/{box_id}/export", id: "exportBox", summary: "Export a stopped box as an archive", tag: "Boxes",
			body: typ[wire.ExportBoxRequest](), bodyOptional: true, status: 200, respRaw: "application/octet-stream", errors: boxErrors, stream: true, handle: (*API).exportBox},
		{method: "POST", path: "/boxes/import", id: "importBox", summary: "Make a box from an exported archive (untrusted)", tag: "Boxes",
			query: []param{{"name", "string", "The new box's name", false}}, bodyRaw: "application/octet-stream", status: 201, resp: typ[wire.Box](), errors: []int{400, 401, 409, 413, 429}, stream: true, handle: (*API).importBox},

		{method: "POST", path: "/boxes/{box_id}/exec", id: "startExecution", idempotent: true, summary: "Start a command; attach to stream it", tag: "Execution",
			body: typ[wire.ExecRequest](), status: 201, resp: typ[wire.ExecResponse](), errors: []int{400, 401, 404, 409, 429}, handle: (*API).startExec},
		{method: "GET", path: "/boxes/{box_id}/executions", id: "listExecutions", summary: "The box's executions started through this server, running or retained", tag: "Execution",
			status: 200, resp: typ[[]wire.ExecutionInfo](), errors: []int{400, 401, 404}, handle: (*API).listExecs},
		{method: "GET", path: "/boxes/{box_id}/executions/{exec_id}", id: "getExecution", summary: "An execution's status", tag: "Execution",
			status: 200, resp: typ[wire.ExecutionInfo](), errors: []int{400, 401, 404}, handle: (*API).getExec},
		{method: "DELETE", path: "/boxes/{box_id}/executions/{exec_id}", id: "killExecution", summary: "Kill (SIGKILL) and forget an execution", tag: "Execution",
			status: 204, errors: []int{400, 401, 404}, handle: (*API).killExec},
		{method: "GET", path: "/boxes/{box_id}/executions/{exec_id}/attach", id: "attachExecution", summary: "Stream an execution over a WebSocket", tag: "Execution",
			query:  []param{{"stdin", "boolean", "false: this client sends no stdin (default true)", false}},
			status: 101, errors: []int{400, 401, 404, 409}, stream: true, handle: (*API).attachExec},
		{method: "POST", path: "/boxes/{box_id}/executions/{exec_id}/signal", id: "signalExecution", idempotent: true, summary: "Signal an execution", tag: "Execution",
			body: typ[wire.SignalRequest](), status: 204, errors: []int{400, 401, 404, 409}, handle: (*API).signalExec},
		{method: "POST", path: "/boxes/{box_id}/executions/{exec_id}/resize", id: "resizeExecution", summary: "Resize an execution's terminal", tag: "Execution",
			body: typ[wire.ResizeRequest](), status: 204, errors: []int{400, 401, 404, 409}, handle: (*API).resizeExec},

		{method: "PUT", path: "/boxes/{box_id}/files", id: "uploadFiles", summary: "Extract a tar archive at a path in the box", tag: "Files",
			query: []param{{"path", "string", "Destination directory in the box", true}, {"overwrite", "boolean", "Replace existing files (default true)", false},
				{"source_is_dir", "boolean", "true (default): extract the archive into path; false: the archive holds one file, written as path (or into it, if a directory)", false},
				{"layout", "string", "boxlite's: the archive is one directory, placed as a local copy places it: docker (it becomes path when path does not exist, else goes inside) or boxlite (always inside path)", false}},
			bodyRaw: "application/x-tar", status: 204, errors: []int{400, 401, 404, 409, 413}, stream: true, handle: (*API).uploadFiles},
		{method: "GET", path: "/boxes/{box_id}/files", id: "downloadFiles", summary: "A tar archive of a path in the box", tag: "Files",
			query:  []param{{"path", "string", "Source path in the box", true}, {"follow_symlinks", "boolean", "Follow a symlink named as the source", false}},
			status: 200, respRaw: "application/x-tar", errors: []int{400, 401, 404, 409, 413}, stream: true, handle: (*API).downloadFiles},

		{method: "POST", path: "/boxes/{box_id}/network/tunnel", id: "prepareTunnel", summary: "A descriptor for a tunnel to a port in the box: CONNECT to its uri's authority (the userinfo is the tunnel's token)", tag: "Network",
			query: []param{{"port", "integer", "Port in the box", true}}, status: 200, resp: typ[wire.TunnelDescriptor](), errors: []int{400, 401, 404, 429, 501}, handle: (*API).prepareTunnel},
		{method: "DELETE", path: "/boxes/{box_id}/network/tunnel", id: "revokeTunnel", summary: "Withdraw the descriptors of a port (open connections go on)", tag: "Network",
			query: []param{{"port", "integer", "Port in the box", true}}, status: 204, errors: []int{400, 401, 404}, handle: (*API).revokeTunnel},

		{method: "GET", path: "/metrics", id: "getRuntimeMetrics", summary: "The runtime's counters", tag: "Metrics",
			status: 200, resp: typ[wire.RuntimeMetrics](), errors: []int{401}, handle: (*API).runtimeMetrics},
		{method: "GET", path: "/boxes/{box_id}/metrics", id: "getBoxMetrics", summary: "A box's counters and samples", tag: "Metrics",
			status: 200, resp: typ[wire.BoxMetrics](), errors: []int{400, 401, 404, 409}, handle: (*API).boxMetrics},

		{method: "POST", path: "/images/pull", id: "pullImage", idempotent: true, summary: "Pull an image into the server's store", tag: "Images",
			body: typ[wire.PullImageRequest](), status: 200, resp: typ[wire.ImageInfo](), errors: []int{400, 401, 422}, handle: (*API).pullImage},
		{method: "GET", path: "/images", id: "listImages", summary: "The server's images", tag: "Images",
			query: pageParams, status: 200, resp: typ[wire.ListImagesResponse](), errors: []int{400, 401}, handle: (*API).listImages},
		{method: "GET", path: "/images/{image_id}", id: "getImage", summary: "An image, by manifest digest", tag: "Images",
			status: 200, resp: typ[wire.ImageInfo](), errors: []int{400, 401, 404}, handle: (*API).getImage},
		{method: "HEAD", path: "/images/{image_id}", id: "imageExists", summary: "Whether an image is in the store", tag: "Images",
			status: 204, errors: []int{401, 404}, handle: (*API).headImage},

		{method: "POST", path: "/api-keys", id: "createApiKey", summary: "BoxLite cloud's (501); use boxlite serve key create", tag: "API Keys",
			status: 201, errors: []int{401, 501}, handle: notServedRoute("issuing keys over the API (use `boxlite serve key create`)")},
		{method: "GET", path: "/api-keys", id: "listApiKeys", summary: "BoxLite cloud's (501); use boxlite serve key ls", tag: "API Keys",
			status: 200, errors: []int{401, 501}, handle: notServedRoute("listing keys over the API (use `boxlite serve key ls`)")},
		{method: "DELETE", path: "/api-keys/{name}", id: "revokeApiKey", summary: "BoxLite cloud's (501); use boxlite serve key rm", tag: "API Keys",
			status: 204, errors: []int{401, 501}, handle: notServedRoute("revoking keys over the API (use `boxlite serve key rm`)")},
		{method: "POST", path: "/volumes", id: "createVolume", summary: "Managed volumes are BoxLite cloud's (501)", tag: "Volumes",
			status: 201, errors: []int{401, 501}, handle: notServedRoute("managed volumes")},
		{method: "GET", path: "/volumes", id: "listVolumes", summary: "Managed volumes are BoxLite cloud's (501)", tag: "Volumes",
			status: 200, errors: []int{401, 501}, handle: notServedRoute("managed volumes")},
		{method: "GET", path: "/volumes/{volume_id}", id: "getVolume", summary: "Managed volumes are BoxLite cloud's (501)", tag: "Volumes",
			status: 200, errors: []int{401, 501}, handle: notServedRoute("managed volumes")},
		{method: "DELETE", path: "/volumes/{volume_id}", id: "removeVolume", summary: "Managed volumes are BoxLite cloud's (501)", tag: "Volumes",
			status: 204, errors: []int{401, 501}, handle: notServedRoute("managed volumes")},
	}
}

func notServedRoute(what string) func(*API, http.ResponseWriter, *http.Request) error {
	return func(*API, http.ResponseWriter, *http.Request) error { return notServed(what) }
}
