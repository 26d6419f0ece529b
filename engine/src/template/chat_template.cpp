// ChatTemplate: parse once, render many times. The interpreter's internal TemplateError
// becomes an Error value here; nothing thrown inside the template module gets out.
#include "powerhouse/chat_template.h"

#include <fmt/format.h>

#include <cctype>
#include <new>

#include "template/interpreter.h"
#include "template/lexer.h"
#include "template/parser.h"
#include "template/text.h"

namespace powerhouse {

struct ChatTemplate::Impl {
    std::string source;  // normalized
    jinja::TemplateAst ast;
};

ChatTemplate::~ChatTemplate() = default;

namespace {

ErrorCode error_code(jinja::ErrorKind kind) {
    switch (kind) {
        case jinja::ErrorKind::syntax:
            return ErrorCode::format;
        case jinja::ErrorKind::unsupported:
        case jinja::ErrorKind::limit:
            return ErrorCode::unsupported;
        default:
            return ErrorCode::invalid_argument;
    }
}

Error to_error(const jinja::TemplateError& error, std::string_view source) {
    const std::string where =
        error.offset == jinja::kNoPosition ? std::string("1:1") : jinja::line_column(source, error.offset);
    return make_error(error_code(error.kind), fmt::format("{}: {}", where, error.message));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, const TemplateLimits& limits) {
    if (source.size() > limits.max_source_bytes) {
        return make_error(ErrorCode::unsupported,
                          fmt::format("1:1: the template is {} bytes, more than the limit of {}", source.size(),
                                      limits.max_source_bytes));
    }
    if (!jinja::is_valid_utf8(source)) return make_error(ErrorCode::format, "1:1: the template is not valid UTF-8");
    auto impl = std::make_shared<Impl>();
    impl->source = jinja::normalize_source(source);
    try {
        impl->ast = jinja::parse_template(impl->source, limits);
    } catch (const jinja::TemplateError& error) {
        return to_error(error, impl->source);
    } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::out_of_memory, "out of memory while parsing the template");
    }
    return ChatTemplate(std::shared_ptr<const Impl>(std::move(impl)));
}

template <class F>
auto ChatTemplate::run(F&& body) const -> decltype(body(std::declval<const Impl&>())) {
    if (!impl_) return make_error(ErrorCode::invalid_argument, "render() on a moved-from ChatTemplate");
    try {
        return body(*impl_);
    } catch (const jinja::TemplateError& error) {
        return to_error(error, impl_->source);
    } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::out_of_memory, "out of memory while rendering the template");
    } catch (const std::exception& e) {
        return make_error(ErrorCode::internal, fmt::format("rendering the template failed: {}", e.what()));
    }
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
    return run([&](const Impl& impl) -> Result<std::string> {
        jinja::Interpreter interpreter(impl.ast, options);
        return interpreter.render(context);
    });
}

Result<RenderedPrompt> ChatTemplate::render_prompt(const nlohmann::ordered_json& context,
                                                   const RenderOptions& options) const {
    return run([&](const Impl& impl) -> Result<RenderedPrompt> {
        jinja::Interpreter interpreter(impl.ast, options);
        jinja::TrackedText out = interpreter.render_tracked(context, options.trusted_variables);
        return RenderedPrompt{std::move(out.text), std::move(out.data)};
    });
}

std::vector<TextSegment> RenderedPrompt::segments() const {
    std::vector<TextSegment> out;
    const std::string_view all(text);
    size_t at = 0;
    for (const auto& [begin, end] : data_ranges) {
        if (begin > at) out.push_back({all.substr(at, begin - at), true});
        out.push_back({all.substr(begin, end - begin), false});
        at = end;
    }
    if (at < all.size()) out.push_back({all.substr(at), true});
    return out;
}

const std::string& ChatTemplate::source() const {
    static const std::string empty;
    return impl_ ? impl_->source : empty;
}

Result<std::string> render_template(std::string_view source, const nlohmann::ordered_json& context,
                                    const RenderOptions& options) {
    Result<ChatTemplate> parsed = ChatTemplate::parse(source, options.limits);
    if (!parsed) return parsed.error();
    return parsed->render(context, options);
}

bool template_uses_variable(std::string_view source, std::string_view name) {
    auto is_identifier = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
    for (size_t pos = source.find(name); pos != std::string_view::npos; pos = source.find(name, pos + 1)) {
        const bool starts = pos == 0 || !is_identifier(source[pos - 1]);
        const size_t after = pos + name.size();
        const bool ends = after == source.size() || !is_identifier(source[after]);
        if (starts && ends) return true;
    }
    return false;
}

}  // namespace powerhouse
