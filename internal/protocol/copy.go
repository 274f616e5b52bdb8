package protocol

// CopyIn receives a tar stream into the box at Dest, by docker cp's rules
// (see filecopy.Prepare). Box paths resolve inside the box's root, its
// symlinks as in the box.
type CopyIn struct {
	Dest string `msgpack:"dest"`
	// Name is the source's name, the stream's top-level entry; empty: the
	// stream holds a directory's contents.
	Name      string `msgpack:"name,omitempty"`
	Overwrite bool   `msgpack:"overwrite"`
	// Lane, when not 0 (needs FeatureLane), is how many slots from the
	// lane's start the copy may use: the host writes the tar stream there
	// and announces each chunk with TLane; the agent frees slots with
	// TLaneFree. TStdinClose still ends the stream.
	Lane int `msgpack:"lane,omitempty"`
}

// CopyOut sends the box path Src as a tar stream: Src itself under its own
// name or, with Contents, the directory's entries. Follow follows Src if it
// is a symlink.
type CopyOut struct {
	Src      string `msgpack:"src"`
	Contents bool   `msgpack:"contents,omitempty"`
	Follow   bool   `msgpack:"follow,omitempty"`
	// Lane, as CopyIn.Lane: the agent writes the tar stream into the
	// lane's slots and announces each chunk with TLane; the host frees
	// them with TLaneFree.
	Lane int `msgpack:"lane,omitempty"`
}

// Watch asks for the changes under the box directory Path (resolved as
// the box's processes see it, through no symlink below the box's root):
// its entries', and with Recursive its subdirectories' too, to
// MaxWatchDepth levels and MaxWatches directories in all (more: ErrLimit).
type Watch struct {
	Path      string `msgpack:"path"`
	Recursive bool   `msgpack:"recursive,omitempty"`
}

// Bounds of one watch.
const (
	MaxWatches    = 8192
	MaxWatchDepth = 32
)

// A watch's events, as the agent sends them: each a WatchRecord, one byte
// of WatchOp, two bytes of big-endian length, then the name, relative to
// the watched directory ("" for the directory itself), at most
// MaxWatchName bytes.
type WatchOp byte

const (
	WatchCreate   WatchOp = 1 // made, or moved in
	WatchWrite    WatchOp = 2 // written and closed, or modified
	WatchRemove   WatchOp = 3 // removed
	WatchRename   WatchOp = 4 // moved away (its new name, if watched, is a WatchCreate)
	WatchChmod    WatchOp = 5 // its mode, owner or times changed
	WatchOverflow WatchOp = 6 // events were lost (the kernel's queue overflowed); no name
)

// MaxWatchName bounds a WatchRecord's name.
const MaxWatchName = 4096

// AppendWatchRecord appends one event's record to b.
func AppendWatchRecord(b []byte, op WatchOp, name string) []byte {
	if len(name) > MaxWatchName {
		name = name[:MaxWatchName]
	}
	return append(append(b, byte(op), byte(len(name)>>8), byte(len(name))), name...)
}

// LaneChunk is a chunk of a copy's data in the lane: Len bytes (1 to
// LaneSlot) at Off, which is the start of the sender's next slot.
type LaneChunk struct {
	Off int64 `msgpack:"off"`
	Len int   `msgpack:"len"`
}

// LaneGrant answers TLaneAsk: the slots the exec's stdout may use, 0 for
// none (the lane is busy). At most the lane's slots.
type LaneGrant struct {
	Slots int `msgpack:"slots"`
}

// LaneFree gives back the oldest Slots chunks' slots.
type LaneFree struct {
	Slots int `msgpack:"slots"`
}

// CopyDone ends a copy stream that succeeded, with what the agent counted.
type CopyDone struct {
	Entries int64 `msgpack:"entries"`
	Bytes   int64 `msgpack:"bytes"`
	Skipped int64 `msgpack:"skipped,omitempty"` // device nodes, FIFOs, sockets
}
