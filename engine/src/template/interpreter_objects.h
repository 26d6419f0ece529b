// Run-time objects of one render: variable scopes, macros, the `loop` object, and the
// arena that owns everything mutable (namespaces, macros, captured scopes, stateful
// functions) until the render ends.
//
// Thread-safety: one render, one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "template/limits.h"
#include "template/value.h"

namespace powerhouse::jinja {

struct MacroStmt;

// Variables visible at one level: the template's top level, a macro call, a for-loop
// iteration (jinja2 gives every iteration a fresh scope: `set` inside a loop body does not
// survive the iteration), a with block.
class Scope {
public:
    explicit Scope(Scope* parent = nullptr) : parent_(parent) {}

    const Value* find(std::string_view name) const;
    void set(std::string_view name, Value value);
    Scope* parent() const { return parent_; }
    bool has_local(std::string_view name) const { return find_local(name) != nullptr; }
    // The variables of this scope and its parents up to (not including) `stop`, innermost
    // first (for capturing closures).
    void collect_until(const Scope* stop, std::vector<std::pair<std::string, Value>>& out) const;

private:
    const Value* find_local(std::string_view name) const;

    Scope* parent_;
    std::vector<std::pair<std::string, Value>> vars_;
    std::unordered_map<std::string, size_t> index_;  // built once vars_ grows large
};

struct MacroObject {
    std::string name;
    const MacroStmt* definition = nullptr;
    Scope* closure = nullptr;  // where the macro was defined (arena-owned or the root)
};

// jinja2's LoopContext: index, index0, revindex, first, last, length, previtem, nextitem,
// cycle(), changed(). Shared so that `{% set l = loop %}` cannot dangle.
struct LoopObject {
    std::shared_ptr<const ListObject> items;
    size_t index0 = 0;
    size_t length = 0;
    Value last_changed;  // loop.changed() remembers its previous arguments
    bool has_last_changed = false;
};

// Owns the render's mutable objects; each one is charged to the budget.
class Arena {
public:
    explicit Arena(Budget& budget) : budget_(budget) {}

    template <class T, class... A>
    T* make(A&&... args) {
        budget_.allocate(sizeof(T) + 64);
        auto object = std::make_shared<T>(std::forward<A>(args)...);
        T* raw = object.get();
        objects_.push_back(std::move(object));
        return raw;
    }

private:
    Budget& budget_;
    std::vector<std::shared_ptr<void>> objects_;
};

}  // namespace powerhouse::jinja
