// Advice that several errors of the runtime give, worded once.
#pragma once

#include <string>

#include "powerhouse/model.h"

namespace powerhouse {

// What to do when a conversation outgrows the context: load the model with a longer one
// (naming what it was trained for) or use another model.
std::string longer_context_hint(const Model& model);

}  // namespace powerhouse
