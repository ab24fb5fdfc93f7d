// A red-black tree of tasks linked by 32-bit references. Internal to src/queue.
//
// Boost.Intrusive's set costs 24 bytes of links per task (three pointers, the color in
// the parent's low bit). This tree runs Boost.Intrusive's own red-black algorithms over
// links that are references into the task region (see task_region.h): 12 bytes. Nodes and
// the tree's header must therefore live in the region; the header is taken from it when
// the tree is made.
//
// It offers what the store uses of a set: ordered insert (with a hint), erase, first
// element, lower and upper bound by a time alone, forward iteration and disposal. Equal
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

    static node_ptr ptr(std::uint32_t ref) { return static_cast<node_ptr>(region::at(ref)); }

    static node_ptr get_parent(const_node_ptr n) { return ptr(n->parent_color >> 1); }
    static void set_parent(node_ptr n, node_ptr p) {
        n->parent_color = (region::ref_of(p) << 1) | (n->parent_color & 1u);
    }
    static node_ptr get_left(const_node_ptr n) { return ptr(n->left); }
    static void set_left(node_ptr n, node_ptr l) { n->left = region::ref_of(l); }
    static node_ptr get_right(const_node_ptr n) { return ptr(n->right); }
    static void set_right(node_ptr n, node_ptr r) { n->right = region::ref_of(r); }
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

    RegionTree() : header_(static_cast<node_ptr>(region::take_node())) {
        new (header_) TreeLinks();
        Algo::init_header(header_);
    }
    // The elements are the owner's: it disposes of them (clear_and_dispose) first.
    ~RegionTree() { region::give_node(header_); }
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

    // The longest path from the root to a leaf, in nodes (tests check the balance).
    std::size_t depth() const { return depth_of(TreeNodeTraits::get_parent(header_)); }

  private:
    static std::size_t depth_of(const TreeLinks* n) {
        if (n == nullptr) return 0;
        return 1 + std::max(depth_of(TreeNodeTraits::get_left(n)),
                            depth_of(TreeNodeTraits::get_right(n)));
    }

    node_ptr header_;
    std::size_t size_ = 0;
};

}  // namespace dueq::queue::detail
