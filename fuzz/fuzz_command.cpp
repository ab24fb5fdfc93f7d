// Why: queue::decode_command reads the data of every log entry a replica applies: entries
// arrive from the leader over the peer links and from this node's RocksDB after a
// restart, so a damaged record or a confused peer hands it any bytes. It must refuse
// them (nullopt), never crash or leak. What it accepts must encode back to bytes that
// decode to the same command and encode identically again: the decoder and the encoder
// agree on the format, so an accepted entry has exactly one meaning on every replica.
#include "fuzz/fuzz_support.h"
#include "queue/command_codec.h"

//
// queue::peek_task_name reads the same bytes ahead of decoding them (a hint for loading
// memory): it must never read outside them, and a name it gives for bytes that decode to
// a command naming a task must be that command's.
namespace {
template <class C>
concept NamesTask = requires(const C& c) {
    c.queue;
    c.key;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace dueq;
    const auto bytes = fuzz::as_view(data, size);
    const auto name = queue::peek_task_name(bytes);
    auto cmd = queue::decode_command(bytes);
    if (!cmd) return 0;
    if (name)
        std::visit(
            [&](const auto& c) {
                if constexpr (NamesTask<std::decay_t<decltype(c)>>) {
                    FUZZ_CHECK(c.queue == name->queue);
                    FUZZ_CHECK(c.key == name->key);
                }
            },
            *cmd);
    // msgpack-c's packer converts a double of exactly 2^64 to uint64_t (undefined
    // behaviour inside msgpack-c). Only a forged entry carries one, apply refuses it
    // (late_share must be within 0..1) and a node never re-encodes a decoded command.
    if (const auto* d = std::get_if<queue::Declare>(&*cmd); d && d->late_share == 0x1p64) return 0;
    // Commands have no operator== (late_share may be NaN): compare their encodings.
    const std::string once = queue::encode_command(*cmd);
    auto again = queue::decode_command(once);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->index() == cmd->index());
    FUZZ_CHECK(queue::encode_command(*again) == once);
    return 0;
}
