// Package convert turns abi's wire structs into core's types and back, once,
// for every edge (the C ABI today, the server next): durations through
// abi.Seconds, defaults left to core, core's structs never marshalled as
// they are.
package convert
