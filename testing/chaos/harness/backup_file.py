"""Reads a backup file as docs/operations.md ("Backing up") describes it, independently of
the C++ reader: the header, the store-wide record and every (queue, key) -> record. Used
to check what `dueqctl backup` wrote and what a restored cluster holds. Checksums are left
to dueqd --restore (pure Python CRC-32C would take minutes on a large file); the framing,
the lengths and the end record are checked here.

A task record is its CRC (4 bytes) then msgpack: [1, state, time, aux, hlc, version,
attempts, payload, (lease, owner, rod)] for a task, [2, hlc, until] for a deleted key."""
import struct

import msgpack

MAGIC = b"DUEQBKP1"


class BackupError(Exception):
    pass


def _be(data, at, n):
    if at + n > len(data):
        raise BackupError(f"ends early at byte {at}")
    return int.from_bytes(data[at:at + n], "big"), at + n


def read(path):
    """(header dict, sealed store-wide record, {(queue, key): body msgpack list})."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise BackupError("no DUEQBKP1 at its start")
    at = len(MAGIC)
    n, at = _be(data, at, 4)
    body = data[at:at + n]
    at += n + 4  # the header's CRC
    index, term, time_ms, created = struct.unpack(">QQqq", body[:32])
    strings, p = [], 32
    for _ in range(3):
        ln = int.from_bytes(body[p:p + 2], "big")
        strings.append(body[p + 2:p + 2 + ln].decode())
        p += 2 + ln
    header = dict(index=index, term=term, time=time_ms, created_ms=created,
                  cluster=strings[0], node=strings[1], version=strings[2])
    store_meta, records, chunk_bytes = None, {}, 0
    while True:
        n, at = _be(data, at, 4)
        if n == 0:
            break
        chunk = data[at:at + n]
        if len(chunk) != n:
            raise BackupError("a chunk ends early")
        at += n + 4
        chunk_bytes += n
        if store_meta is None:
            store_meta = chunk
            continue
        p = 0
        while p < len(chunk):
            kn, p = _be(chunk, p, 4)
            key = chunk[p:p + kn]
            p += kn
            vn, p = _be(chunk, p, 4)
            value = chunk[p:p + vn]
            p += vn
            qn = int.from_bytes(key[:2], "big")
            records[(key[2:2 + qn], key[2 + qn:])] = msgpack.unpackb(value[4:], raw=True)
    tasks, at = _be(data, at, 8)
    total, at = _be(data, at, 8)
    at += 4
    if tasks != len(records) or total != chunk_bytes or at != len(data):
        raise BackupError(f"end record: {tasks} tasks and {total} bytes, but the chunks hold "
                          f"{len(records)} and {chunk_bytes}; {len(data) - at} bytes after it")
    return header, store_meta, records


TASK, TOMBSTONE = 1, 2
READY, TAKEN, BURIED, DONE, HELD = 0, 1, 2, 3, 4


def same_but_for_time(before, after, now_ms):
    """Whether record `after` is `before` as time alone may have changed it on a cluster
    that applied nothing else: a lease that expired puts a taken task back to ready, a
    release delay that ended makes a held task ready, retention drops a done task or a
    deleted key (absent: after is None). Returns None when it is, else why not."""
    if after is None:
        if before[0] == TOMBSTONE or before[1] == DONE:
            return None
        return "missing"
    if before[0] != after[0]:
        return f"kind {before[0]} became {after[0]}"
    if before[0] == TOMBSTONE:
        return None if before == after else f"{before} became {after}"
    # [1, state, time, aux, hlc, version, attempts, payload, ...]
    b_state, a_state = before[1], after[1]
    if b_state == a_state:
        return None if before == after else f"{before[:7]} became {after[:7]}"
    if before[7] != after[7]:
        return "the payload changed"
    # An expired lease is a failed attempt: a new version, maybe a retry time.
    if b_state == TAKEN and a_state in (READY, BURIED) and before[3] <= now_ms:
        return None
    if b_state == HELD and a_state == READY and before[2] == after[2] and before[4:7] == after[4:7]:
        return None
    return f"state {b_state} became {a_state}: {before[:7]} -> {after[:7]}"
