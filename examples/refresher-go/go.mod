module dueq.dev/examples/refresher-go

go 1.19

require dueq.dev/dueq v0.0.0

require (
	github.com/vmihailenco/msgpack/v5 v5.3.5 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)

// The client library from this repository.
replace dueq.dev/dueq => ../../clients/go

// Offline build: msgpack from Debian's golang-github-vmihailenco-msgpack.v5-dev, as in
// clients/go/go.mod.
replace github.com/vmihailenco/msgpack/v5 => /usr/share/gocode/src/github.com/vmihailenco/msgpack/v5

replace github.com/vmihailenco/tagparser/v2 => /usr/share/gocode/src/github.com/vmihailenco/tagparser/v2
