// Helpers shared by the template tests: rendering with the fixtures' fixed clock, and
// readable differences between expected and actual text.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "powerhouse/chat_template.h"

namespace powerhouse::test {

// The moment scripts/fixtures/make_template_fixture.py gives strftime_now.
inline RenderOptions fixture_options() {
    using namespace std::chrono;
    RenderOptions options;
    options.now = local_days{year{2024} / July / 26} + hours{14} + minutes{5} + seconds{9};
    return options;
}

// Shows where two texts first differ, with escaped context on both sides.
std::string describe_difference(std::string_view expected, std::string_view actual);

// `source` rendered with an empty context and default options, or "ERROR: " and the message.
inline std::string render_empty(std::string_view source) {
    Result<std::string> out = render_template(source, nlohmann::ordered_json::object());
    return out.ok() ? *out : "ERROR: " + out.error().message;
}

// Parses the JSON text of a context (keys keep their order).
inline nlohmann::ordered_json context_from(std::string_view json_text) {
    return nlohmann::ordered_json::parse(json_text);
}

}  // namespace powerhouse::test
