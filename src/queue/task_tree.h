// A red-black tree of tasks linked by 32-bit references. Internal to src/queue.
//
// Boost.Intrusive's set costs 24 bytes of links per task (three pointers, the color in
// the parent's low bit). This tree runs Boost.Intrusive's own red-black algorithms over
// links that are references into the store's task region (see task_region.h): 12 bytes.
// Nodes and the tree's header must therefore live in one region; the header is taken from
// it when the tree is made. A link is read back from the address of the node holding it.
//
// It offers what the store uses of a set: ordered insert (with a hint), erase, first
// element, lower and upper bound by a time alone, forward iteration and disposal, and a
// restart's bulk build from sorted tasks. Equal
// elements are allowed; the store's orders have none (keys are unique per queue).
#pragma once

#include <algorithm>
#include <boost/intrusive/rbtree_algorithms.hpp>
#include <cstddef>
#include <cstdint>

#include "queue/task_region.h"

namespace dueq::queue::detail {

struct TreeLinks {
    std::uint32_t parent_color = 0;  // parent reference << 1 | color
    std::uint32_t left = 0;
    std::uint32_t right = 0;
};

struct TreeNodeTraits {
    using node = TreeLinks;
    using node_ptr = TreeLinks*;
    using const_node_ptr = const TreeLinks*;
    using color = std::uint32_t;

    // The node `ref` names, read from node `n` (both in one region).
    static node_ptr ptr(const_node_ptr n, std::uint32_t ref) {
        return static_cast<node_ptr>(TaskRegion::at(n, ref));
    }

    static node_ptr get_parent(const_node_ptr n) { return ptr(n, n->parent_color >> 1); }
    static void set_parent(node_ptr n, node_ptr p) {
        n->parent_color = (TaskRegion::ref_of(p) << 1) | (n->parent_color & 1u);
    }
    static node_ptr get_left(const_node_ptr n) { return ptr(n, n->left); }
    static void set_left(node_ptr n, node_ptr l) { n->left = TaskRegion::ref_of(l); }
    static node_ptr get_right(const_node_ptr n) { return ptr(n, n->right); }
    static void set_right(node_ptr n, node_ptr r) { n->right = TaskRegion::ref_of(r); }
    static color get_color(const_node_ptr n) { return n->parent_color & 1u; }
    static void set_color(node_ptr n, color c) { n->parent_color = (n->parent_color & ~1u) | c; }
    static color black() { return 0; }
    static color red() { return 1; }
};

// T: the element type, derived from TreeLinks. Order: a strict weak order on T. Probe:
// compares a T with a key of another type both ways (for lower_bound and upper_bound).
template <class T, class Order, class Probe>
class RegionTree {
    using Algo = boost::intrusive::rbtree_algorithms<TreeNodeTraits>;
    using node_ptr = TreeLinks*;

    struct NodeOrder {
        bool operator()(const TreeLinks* a, const TreeLinks* b) const {
            return Order{}(static_cast<const T&>(*a), static_cast<const T&>(*b));
        }
    };
    struct NodeProbe {
        template <class K>
        bool operator()(const TreeLinks* n, const K& k) const {
            return Probe{}(static_cast<const T&>(*n), k);
        }
        template <class K>
        bool operator()(const K& k, const TreeLinks* n) const {
            return Probe{}(k, static_cast<const T&>(*n));
        }
    };

  public:
    template <class E>
    class Iter {
      public:
        Iter() = default;
        E& operator*() const { return static_cast<E&>(*n_); }
        E* operator->() const { return static_cast<E*>(n_); }
        Iter& operator++() {
            n_ = Algo::next_node(n_);
            return *this;
        }
        bool operator==(const Iter& o) const { return n_ == o.n_; }
        bool operator!=(const Iter& o) const { return n_ != o.n_; }

      private:
        friend class RegionTree;
        explicit Iter(node_ptr n) : n_(n) {}
        node_ptr n_ = nullptr;
    };
    using iterator = Iter<T>;
    using const_iterator = Iter<const T>;
    using probe_type = Probe;  // what lower_bound and upper_bound take

    // Its elements must come from `region` too (the store's arena's slabs).
    explicit RegionTree(TaskRegion& region)
        : region_(&region), header_(static_cast<node_ptr>(region.take_node())) {
        new (header_) TreeLinks();
        Algo::init_header(header_);
    }
    // The elements are the owner's: it disposes of them (clear_and_dispose) first.
    ~RegionTree() { region_->give_node(header_); }
    RegionTree(const RegionTree&) = delete;
    RegionTree& operator=(const RegionTree&) = delete;

    iterator begin() { return iterator(Algo::begin_node(header_)); }
    iterator end() { return iterator(header_); }
    const_iterator begin() const { return const_iterator(Algo::begin_node(header_)); }
    const_iterator end() const { return const_iterator(header_); }
    bool empty() const { return size_ == 0; }
    std::size_t size() const { return size_; }

    void insert(T& t) {
        Algo::insert_equal_upper_bound(header_, &t, NodeOrder{});
        ++size_;
    }
    // Cheapest when `t` belongs right before `hint` (end(): last).
    void insert(iterator hint, T& t) {
        Algo::insert_equal(header_, hint.n_, &t, NodeOrder{});
        ++size_;
    }
    void erase(iterator it) {
        Algo::erase(header_, it.n_);
        --size_;
    }
    // `t` must be in this tree.
    iterator iterator_to(T& t) { return iterator(&t); }

    template <class K>
    iterator lower_bound(const K& k, Probe) {
        return iterator(Algo::lower_bound(header_, k, NodeProbe{}));
    }
    template <class K>
    iterator upper_bound(const K& k, Probe) {
        return iterator(Algo::upper_bound(header_, k, NodeProbe{}));
    }
    template <class K>
    const_iterator upper_bound(const K& k, Probe) const {
        return const_iterator(Algo::upper_bound(header_, k, NodeProbe{}));
    }

    template <class Disposer>
    void clear_and_dispose(Disposer dispose) {
        Algo::clear_and_dispose(header_, [&](node_ptr n) { dispose(static_cast<T*>(n)); });
        size_ = 0;
    }

    // Makes an empty tree hold items[0..n) if they are in the tree's order, and returns
    // whether they were (if not, the tree stays empty). Each node's links are written
    // once, in order, with one comparison to the node before it and no rebalancing. The
    // shape is the balanced one (each node the middle of its range): every path from the
    // root to a leaf has the same black nodes when only the deepest level is red.
    bool assign_sorted(T* const* items, std::size_t n) {
        if (size_ != 0) return false;
        if (n == 0) return true;
        std::size_t deepest = 0;
        while ((std::size_t{2} << deepest) <= n)
            ++deepest;
        Build b{items, n, deepest};
        node_ptr root = b.subtree(0, n, 0, header_);
        if (b.out_of_order) return false;
        TreeNodeTraits::set_parent(header_, root);
        TreeNodeTraits::set_left(header_, items[0]);
        TreeNodeTraits::set_right(header_, items[n - 1]);
        size_ = n;
        return true;
    }

    // The longest path from the root to a leaf, in nodes (tests check the balance).
    std::size_t depth() const { return depth_of(TreeNodeTraits::get_parent(header_)); }
    // Whether the links make a red-black tree in order, as the header and size say (tests).
    bool well_formed() const {
        const TreeLinks* root = TreeNodeTraits::get_parent(header_);
        if (root == nullptr) return size_ == 0;
        if (TreeNodeTraits::get_parent(root) != header_) return false;
        if (TreeNodeTraits::get_color(root) != TreeNodeTraits::black()) return false;
        std::size_t count = 0;
        if (black_height(root, &count) < 0 || count != size_) return false;
        const TreeLinks* first = root;
        while (TreeNodeTraits::get_left(first) != nullptr)
            first = TreeNodeTraits::get_left(first);
        const TreeLinks* last = root;
        while (TreeNodeTraits::get_right(last) != nullptr)
            last = TreeNodeTraits::get_right(last);
        if (TreeNodeTraits::get_left(header_) != first) return false;
        if (TreeNodeTraits::get_right(header_) != last) return false;
        for (auto it = begin(), next = begin(); it != end(); it = next)
            if (++next != end() && Order{}(*next, *it)) return false;
        return true;
    }

  private:
    struct Build {
        T* const* items;
        std::size_t n;
        std::size_t deepest;
        std::size_t visited = 0;  // in order, for prefetching the nodes ahead
        bool out_of_order = false;

        static std::size_t middle(std::size_t lo, std::size_t hi) { return lo + (hi - lo) / 2; }

        node_ptr subtree(std::size_t lo, std::size_t hi, std::size_t depth, node_ptr parent) {
            if (lo >= hi || out_of_order) return nullptr;
            const std::size_t mid = middle(lo, hi);
            node_ptr node = items[mid];
            subtree(lo, mid, depth + 1, node);
            if (visited > 0 && Order{}(*items[visited], *items[visited - 1])) out_of_order = true;
            if (out_of_order) return nullptr;
            // In order, so the nodes a few ahead are the next to be written.
            if (visited + 8 < n) __builtin_prefetch(items[visited + 8]);
            ++visited;
            node->parent_color = 0;
            TreeNodeTraits::set_parent(node, parent);
            TreeNodeTraits::set_left(node, lo < mid ? items[middle(lo, mid)] : nullptr);
            TreeNodeTraits::set_right(node, mid + 1 < hi ? items[middle(mid + 1, hi)] : nullptr);
            const bool red = depth > 0 && depth == deepest;
            TreeNodeTraits::set_color(node, red ? TreeNodeTraits::red() : TreeNodeTraits::black());
            subtree(mid + 1, hi, depth + 1, node);
            return node;
        }
    };

    // -1 if the subtree breaks a rule: a child whose parent link is wrong, a red node with
    // a red child, or two paths with different numbers of black nodes.
    static int black_height(const TreeLinks* n, std::size_t* count) {
        if (n == nullptr) return 0;
        ++*count;
        const TreeLinks* kids[2] = {TreeNodeTraits::get_left(n), TreeNodeTraits::get_right(n)};
        int heights[2];
        for (int i = 0; i < 2; ++i) {
            if (kids[i] == nullptr) {
                heights[i] = 0;
                continue;
            }
            if (TreeNodeTraits::get_parent(kids[i]) != n) return -1;
            if (TreeNodeTraits::get_color(n) == TreeNodeTraits::red() &&
                TreeNodeTraits::get_color(kids[i]) == TreeNodeTraits::red())
                return -1;
            heights[i] = black_height(kids[i], count);
        }
        if (heights[0] < 0 || heights[0] != heights[1]) return -1;
        return heights[0] + (TreeNodeTraits::get_color(n) == TreeNodeTraits::black() ? 1 : 0);
    }

    static std::size_t depth_of(const TreeLinks* n) {
        if (n == nullptr) return 0;
        return 1 + std::max(depth_of(TreeNodeTraits::get_left(n)),
                            depth_of(TreeNodeTraits::get_right(n)));
    }

    TaskRegion* region_;
    node_ptr header_;
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
