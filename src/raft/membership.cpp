#include "raft/membership.h"

#include <algorithm>

namespace dueq::raft {

namespace {

bool sorted_unique(const std::vector<NodeId>& ids) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == kNoNode || (i > 0 && ids[i - 1] >= ids[i])) return false;
    }
    return true;
}

void put_u64(std::string& out, std::uint64_t v) {
    for (int s = 56; s >= 0; s -= 8)
        out.push_back(static_cast<char>((v >> s) & 0xff));
}

bool get_u64(std::string_view& in, std::uint64_t& v) {
    if (in.size() < 8) return false;
    v = 0;
    for (int i = 0; i < 8; ++i)
        v = (v << 8) | static_cast<unsigned char>(in[i]);
    in.remove_prefix(8);
    return true;
}

bool get_ids(std::string_view& in, std::vector<NodeId>& ids) {
    std::uint64_t n = 0;
    if (!get_u64(in, n) || n > in.size() / 8) return false;
    ids.resize(n);
    for (auto& id : ids)
        if (!get_u64(in, id)) return false;
    return true;
}

// Format 1: u8 version, be64 count + be64 ids of voters, the same of learners, then the
// directory bytes to the end.
constexpr char kFormat = 1;

}  // namespace

bool Membership::is_voter(NodeId id) const {
    return std::binary_search(voters.begin(), voters.end(), id);
}

bool Membership::is_learner(NodeId id) const {
    return std::binary_search(learners.begin(), learners.end(), id);
}

bool membership_valid(const Membership& m) {
    if (m.voters.empty() || !sorted_unique(m.voters) || !sorted_unique(m.learners)) return false;
    return std::none_of(m.learners.begin(), m.learners.end(),
                        [&](NodeId id) { return m.is_voter(id); });
}

std::size_t voters_changed(const Membership& a, const Membership& b) {
    std::vector<NodeId> diff;
    std::set_symmetric_difference(a.voters.begin(), a.voters.end(), b.voters.begin(),
                                  b.voters.end(), std::back_inserter(diff));
    return diff.size();
}

std::string encode_membership(const Membership& m) {
    std::string out(1, kFormat);
    put_u64(out, m.voters.size());
    for (NodeId id : m.voters)
        put_u64(out, id);
    put_u64(out, m.learners.size());
    for (NodeId id : m.learners)
        put_u64(out, id);
    out += m.directory;
    return out;
}

std::optional<Membership> decode_membership(std::string_view data) {
    if (data.empty() || data[0] != kFormat) return std::nullopt;
    data.remove_prefix(1);
    Membership m;
    if (!get_ids(data, m.voters) || !get_ids(data, m.learners)) return std::nullopt;
    m.directory = std::string(data);
    if (!membership_valid(m)) return std::nullopt;
    return m;
}

std::string describe(const Membership& m) {
    auto list = [](const std::vector<NodeId>& ids) {
        std::string s;
        for (NodeId id : ids)
            s += (s.empty() ? "" : ",") + std::to_string(id);
        return s.empty() ? std::string("none") : s;
    };
    return "voters " + list(m.voters) + " learners " + list(m.learners);
}

}  // namespace dueq::raft
