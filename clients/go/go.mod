module dueq.dev/dueq

go 1.19

require github.com/vmihailenco/msgpack/v5 v5.3.5

require github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect

// Offline build: msgpack comes from Debian's golang-github-vmihailenco-msgpack.v5-dev
// (and its dependency tagparser), installed as source under /usr/share/gocode.
replace github.com/vmihailenco/msgpack/v5 => /usr/share/gocode/src/github.com/vmihailenco/msgpack/v5

replace github.com/vmihailenco/tagparser/v2 => /usr/share/gocode/src/github.com/vmihailenco/tagparser/v2
