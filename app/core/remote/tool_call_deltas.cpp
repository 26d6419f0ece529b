#include "remote/tool_call_deltas.h"

#include <fmt/format.h>

#include "remote/http_client.h"

namespace powerhouse::remote::detail {
namespace {

using nlohmann::json;

// A JSON value's kind, as a message names it.
const char* kind_of(const json& v) {
    if (v.is_object()) return "an object";
    if (v.is_array()) return "an array";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    return "null";
}

Error bad_call(size_t place, bool streamed, const std::string& what) {
    return make_error(ErrorCode::format, fmt::format("tool call {} in {} 'tool_calls': {}", place + 1,
                                                     streamed ? "a chunk's" : "the answer's", what));
}

// `object[key]`: absent or null is none; a string is read; anything else is an error.
Result<std::optional<std::string>> optional_string(const json& object, const char* key, const char* field, size_t place,
                                                   bool streamed) {
    if (!object.contains(key) || object[key].is_null()) return std::optional<std::string>();
    if (!object[key].is_string()) {
        return bad_call(place, streamed, fmt::format("'{}' is {}, not a string", field, kind_of(object[key])));
    }
    return std::optional<std::string>(object[key].get<std::string>());
}

}  // namespace

Result<std::vector<ToolCallDelta>> read_tool_call_deltas(const json& tool_calls, bool streamed) {
    std::vector<ToolCallDelta> out;
    if (tool_calls.is_null()) return out;
    if (!tool_calls.is_array()) {
        return make_error(ErrorCode::format,
                          fmt::format("'tool_calls' is {}, not an array of calls", kind_of(tool_calls)));
    }
    for (size_t place = 0; place < tool_calls.size(); ++place) {
        const json& call = tool_calls[place];
        if (!call.is_object()) return bad_call(place, streamed, fmt::format("it is {}, not an object", kind_of(call)));
        ToolCallDelta d;
        if (streamed) {
            // The index says which call the piece continues; without it, pieces of calls that
            // interleave cannot be told apart.
            if (!call.contains("index")) {
                return bad_call(place, streamed,
                                "it has no 'index' (a streamed call's pieces are put together by their index)");
            }
            const json& index = call["index"];
            if (!index.is_number_unsigned() || index.get<uint64_t>() > UINT32_MAX) {
                return bad_call(place, streamed,
                                fmt::format("its 'index' is {}, not a count from 0",
                                            index.dump(-1, ' ', false, json::error_handler_t::replace)));
            }
            d.index = index.get<uint32_t>();
        } else {
            d.index = static_cast<uint32_t>(place);
        }
        Result<std::optional<std::string>> id = optional_string(call, "id", "id", place, streamed);
        if (!id) return id.error();
        d.id = std::move(id).value();
        if (call.contains("function") && !call["function"].is_null()) {
            const json& function = call["function"];
            if (!function.is_object()) {
                return bad_call(place, streamed, fmt::format("'function' is {}, not an object", kind_of(function)));
            }
            Result<std::optional<std::string>> name =
                optional_string(function, "name", "function.name", place, streamed);
            if (!name) return name.error();
            d.name = std::move(name).value();
            if (function.contains("arguments") && !function["arguments"].is_null()) {
                if (!function["arguments"].is_string()) {
                    return bad_call(place, streamed,
                                    fmt::format("'function.arguments' is {}, not a string of JSON text (OpenAI sends "
                                                "the arguments as text, in pieces when it streams)",
                                                kind_of(function["arguments"])));
                }
                d.arguments = function["arguments"].get<std::string>();
            }
        } else if (!streamed) {
            return bad_call(place, streamed, "it has no 'function' (its name and arguments)");
        }
        out.push_back(std::move(d));
    }
    return out;
}

Result<void> ToolCallAssembler::add(const std::vector<ToolCallDelta>& pieces) {
    for (const ToolCallDelta& piece : pieces) {
        std::vector<ToolCall>& at_index = calls_[piece.index];
        const bool new_id = piece.id && !piece.id->empty();
        // A piece with another id than the call at its index opens a call of its own: Ollama
        // (and some proxies) number every call of an answer 0, telling them apart by id only.
        if (at_index.empty() || (new_id && !at_index.back().id.empty() && at_index.back().id != *piece.id)) {
            at_index.emplace_back();
            ++count_;
        }
        ToolCall& call = at_index.back();
        if (new_id && call.id.empty()) call.id = *piece.id;
        // The first piece that names the call names it; a server that repeats the name in every
        // piece repeats the same one.
        if (piece.name && !piece.name->empty()) {
            if (call.name.empty()) {
                call.name = *piece.name;
            } else if (call.name != *piece.name) {
                return make_error(
                    ErrorCode::format,
                    fmt::format("the tool call at index {} changed its function's name from '{}' to '{}' mid-stream",
                                piece.index, quoted(call.name, secret_), quoted(*piece.name, secret_)));
            }
        }
        call.arguments += piece.arguments;
    }
    return {};
}

Result<std::vector<ToolCall>> ToolCallAssembler::finish() const {
    std::vector<ToolCall> out;
    out.reserve(count_);
    for (const auto& [index, at_index] : calls_) {
        for (const ToolCall& call : at_index) {
            if (call.name.empty()) {
                const std::string id =
                    call.id.empty() ? std::string() : fmt::format(" (id '{}')", quoted(call.id, secret_));
                return make_error(ErrorCode::format,
                                  fmt::format("the tool call at index {}{} ended without a function name: there is "
                                              "no function to call (arguments: '{}')",
                                              index, id, quoted(call.arguments, secret_, 120)));
            }
            out.push_back(call);
            if (out.back().arguments.empty()) out.back().arguments = "{}";
        }
    }
    return out;
}

}  // namespace powerhouse::remote::detail
