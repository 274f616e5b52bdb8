package abi

// RestOptions are boxlite_runtime_new_rest's options_json: a runtime whose
// boxes live in a `boxlite serve` (or another server of BoxLite's REST API)
// at URL. URL is http or https; plain http goes only to a loopback host
// unless InsecureHTTP (as the server listens beyond loopback without TLS
// only when told: a TLS proxy in front). APIKey is sent as
// `Authorization: Bearer`; it is never logged nor put in an error.
type RestOptions struct {
	URL          string `json:"url" doc:"required: http or https; the /v1 prefix is added when missing"`
	APIKey       string `json:"api_key" doc:"required: sent in the Authorization header, never logged nor put in an error"`
	OutputLimit  int64  `json:"output_limit_bytes,omitempty" doc:"as boxlite_runtime_new's: default {DEFAULT_OUTPUT_LIMIT_BYTES}"`
	InsecureHTTP bool   `json:"insecure_http,omitempty" doc:"allow plain http to a host other than loopback: default false"`
}
