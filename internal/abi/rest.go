package abi

// RestOptions are boxlite_runtime_new_rest's options_json: a runtime whose
// boxes live in a `boxlite serve` (or another server of BoxLite's REST API)
// at URL. URL is http or https; plain http goes only to a loopback host
// unless InsecureHTTP (as the server listens beyond loopback without TLS
// only when told: a TLS proxy in front). APIKey is sent as
// `Authorization: Bearer`; it is never logged nor put in an error.
type RestOptions struct {
	URL          string `json:"url"`
	APIKey       string `json:"api_key"`
	OutputLimit  int64  `json:"output_limit_bytes,omitempty"` // as RuntimeOptions'; default DefaultOutputLimitBytes
	InsecureHTTP bool   `json:"insecure_http,omitempty"`
}
