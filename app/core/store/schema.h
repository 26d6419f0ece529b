// The store's numbered migrations: migration N takes a file from schema N - 1 to N. A
// migration is never edited once released; changes go in a new one.
#pragma once

#include <string_view>
#include <vector>

namespace powerhouse::store {

// Index i holds migration i + 1: SQL run in one transaction.
const std::vector<std::string_view>& migrations();

}  // namespace powerhouse::store
