// Hostile templates must fail cleanly, quickly and in bounded memory: endless recursion,
// deep nesting (the parser's recursion!), huge ranges and loops, gigabyte strings, reaching
// for Python internals, broken syntax. Each test asserts the failure and, as a generous
// sanity bound only (speed is measured elsewhere, never asserted), that it took less than
// a few seconds and that the process never grew past 1 GiB.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>

#include "powerhouse/chat_template.h"

namespace powerhouse {
namespace {

using nlohmann::ordered_json;

// A bound for hangs, not a speed test: about a second of work in a debug build, with
// room for a busy machine, times three under AddressSanitizer. Observed times are printed.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanityBoundSeconds = 6.0;
#else
constexpr double kSanityBoundSeconds = 2.0;
#endif

double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Renders (parsing included) and returns the error; fails the test if it succeeds.
std::string expect_failure(std::string_view source, const ordered_json& context = ordered_json::object(),
                           const TemplateLimits& limits = {}) {
    RenderOptions options;
    options.limits = limits;
    const auto start = std::chrono::steady_clock::now();
    const Result<std::string> out = render_template(source, context, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("    failed in %.3f s, peak RSS %.0f MiB: %s\n", seconds, peak_rss_mib(),
                out.ok() ? "(no error!)" : out.error().message.c_str());
    EXPECT_FALSE(out.ok()) << "rendered " << (out.ok() ? out->size() : 0) << " bytes";
    EXPECT_LT(seconds, kSanityBoundSeconds);
    EXPECT_LT(peak_rss_mib(), 1024.0);
    return out.ok() ? std::string() : out.error().message;
}

std::string repeat(std::string_view s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
}

TEST(TemplateHostile, SelfRecursiveMacro) {
    EXPECT_NE(expect_failure("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("macro calls nest deeper"),
              std::string::npos);
}

TEST(TemplateHostile, MutuallyRecursiveMacrosWithWork) {
    expect_failure(
        "{% macro a(n) %}{{ b(n ~ 'x') }}{% endmacro %}{% macro b(n) %}{{ a(n * 2) }}{% endmacro %}{{ a('x') }}");
}

TEST(TemplateHostile, TenThousandNestedParentheses) {
    const std::string message = expect_failure("{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}");
    EXPECT_NE(message.find("nests deeper than the limit"), std::string::npos) << message;
}

TEST(TemplateHostile, DeepNestingOfEveryKind) {
    expect_failure("{{ " + repeat("[", 10000) + repeat("]", 10000) + " }}");
    expect_failure("{{ " + repeat("{'a': ", 10000) + "1" + repeat("}", 10000) + " }}");
    expect_failure("{{ " + repeat("not ", 10000) + "x }}");
    expect_failure("{{ " + repeat("-", 10000) + "1 }}");
    expect_failure("{{ 1" + repeat(" + 1", 100000) + " }}");  // a left-deep chain, built by a loop
    expect_failure("{{ x" + repeat("|trim", 100000) + " }}");
    expect_failure("{{ x" + repeat(".a", 100000) + " }}");
    expect_failure("{{ 1 if " + repeat("x if y else ", 10000) + "2 }}");
    expect_failure(repeat("{% if true %}", 10000) + repeat("{% endif %}", 10000));
    expect_failure(repeat("{% for x in [1] %}", 10000) + repeat("{% endfor %}", 10000));
}

TEST(TemplateHostile, RecursionThroughDeepBodiesStaysWithinTheStack) {
    // Every macro level adds its body's nesting: the interpreter's own nesting limit stops
    // this long before the C++ stack could run out (also in sanitizer builds).
    const std::string body = repeat("[", 120) + "f(n + 1)" + repeat("]", 120);
    const std::string message = expect_failure("{% macro f(n) %}{{ " + body + " }}{% endmacro %}{{ f(0) }}");
    EXPECT_NE(message.find("nests deeper than the limit of 1024 while running"), std::string::npos) << message;
}

TEST(TemplateHostile, LimitsAreCountedExactly) {
    TemplateLimits limits;
    limits.max_loop_iterations = 10;
    limits.max_output_bytes = 64;
    limits.max_call_depth = 3;
    RenderOptions options;
    options.limits = limits;
    auto render = [&](std::string_view source) { return render_template(source, ordered_json::object(), options); };
    EXPECT_TRUE(render("{% for i in range(10) %}{% endfor %}").ok());
    EXPECT_FALSE(render("{% for i in range(11) %}{% endfor %}").ok());
    EXPECT_FALSE(render("{% for i in range(5) %}{% for j in range(2) %}{% endfor %}{% endfor %}").ok());  // 5 + 10
    EXPECT_TRUE(render("{{ 'x' * 64 }}").ok());
    EXPECT_FALSE(render("{{ 'x' * 65 }}").ok());
    EXPECT_FALSE(render("{{ 'x' * 40 }}{{ 'y' * 40 }}").ok());  // the output as a whole
    const char* countdown = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}";
    EXPECT_TRUE(render(std::string(countdown) + "{{ f(2) }}").ok());  // 3 calls deep
    EXPECT_FALSE(render(std::string(countdown) + "{{ f(3) }}").ok());
}

TEST(TemplateHostile, DeeplyNestedContext) {
    // Parsed in one piece: copying a JSON value this deep would itself recurse 100,000 times.
    const ordered_json context = ordered_json::parse("{\"x\": " + repeat("[", 100000) + repeat("]", 100000) + "}");
    expect_failure("{{ x }}", context);
}

TEST(TemplateHostile, DataNestedByTheTemplate) {
    expect_failure("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}");
}

TEST(TemplateHostile, NamespaceContainingItself) {
    expect_failure("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
}

TEST(TemplateHostile, HugeRange) {
    EXPECT_NE(expect_failure("{{ range(10**9)|length }}").find("Range too big"), std::string::npos);
    expect_failure("{% for i in range(10**9) %}{% endfor %}");
    expect_failure("{{ range(-9223372036854775807, 9223372036854775807)|length }}");
}

TEST(TemplateHostile, NestedLoops25kBy25k) {
    const std::string message =
        expect_failure("{% for i in range(25000) %}{% for j in range(25000) %}{% endfor %}{% endfor %}");
    // Whichever comes first: 1,000,000 iterations, or 500 ms in a slow (debug, sanitizer) build.
    EXPECT_TRUE(message.find("loop iterations") != std::string::npos ||
                message.find("ran longer than") != std::string::npos)
        << message;
}

TEST(TemplateHostile, GigabyteStrings) {
    EXPECT_NE(expect_failure("{{ 'x' * 10**10 }}").find("longer than the limit"), std::string::npos);
    expect_failure("{{ 'x' * 1000000 * 1000 }}");
    expect_failure("{{ 1000000 * 'x' * 1000 }}");
    expect_failure("{{ ['x'] * 10**10 }}");
    expect_failure("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
    expect_failure("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}");
    expect_failure("{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyy' * 100) }}");
    expect_failure("{{ [('x' * 1000000)] * 1000 }}");  // printing repeats one string a thousand times
    expect_failure("{{ (['x' * 1000000] * 1000)|join }}");
    expect_failure("{{ ('x\\n' * 100000)|indent(1000) }}");
    expect_failure("{{ 'x'|center(10**10) }}");
}

TEST(TemplateHostile, OutputTooLarge) {
    expect_failure("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
}

TEST(TemplateHostile, ManyAllocationsAddUp) {
    // Each string is small enough, but together they pass the allocation budget.
    TemplateLimits limits;
    limits.max_allocated_bytes = 64ull << 20;
    expect_failure("{% for i in range(100000) %}{% set s = 'x' * 1000 %}{% endfor %}", ordered_json::object(), limits);
}

TEST(TemplateHostile, TimeLimit) {
    TemplateLimits limits;
    limits.max_time = std::chrono::milliseconds(50);
    const std::string message = expect_failure(
        "{% for i in range(100000) %}{% for j in range(9) %}{{ ('ab' * 100)|replace('a', 'c')|length }}{% endfor %}"
        "{% endfor %}",
        ordered_json::object(), limits);
    EXPECT_NE(message.find("ran longer than the limit of 50 ms"), std::string::npos) << message;
}

TEST(TemplateHostile, PythonInternalsAreRefused) {
    const ordered_json context = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"d", {{"a", 1}}}};
    for (const char* source : {
             "{{ ''.__class__ }}",
             "{{ ''.__class__.__mro__[1].__subclasses__() }}",
             "{{ messages.__init__ }}",
             "{{ messages.__class__.__init__.__globals__ }}",
             "{{ range.__globals__ }}",
             "{{ raise_exception.__globals__['os'] }}",
             "{{ namespace.__init__ }}",
             "{{ d.__class__ }}",
             "{{ d['__class__'] }}",
             "{{ messages[0].__dict__ }}",
             "{{ d|attr('__class__') }}",
             "{{ (1).__class__ }}",
             "{% set ns = namespace() %}{{ ns.__dict__ }}",
             "{% for m in messages %}{{ loop.__class__ }}{% endfor %}",
             "{{ strftime_now.__self__ }}",
         }) {
        SCOPED_TRACE(source);
        const std::string message = expect_failure(source, context);
        EXPECT_NE(message.find("is unsafe"), std::string::npos) << message;
    }
    // '_' names that are dict keys are plain data, as in jinja2.
    const Result<std::string> data = render_template("{{ d._private }}", ordered_json{{"d", {{"_private", 7}}}});
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(*data, "7");
}

TEST(TemplateHostile, MutatingMethodsAreRefused) {
    const ordered_json context = {{"l", {1, 2}}, {"d", {{"a", 1}}}};
    for (const char* source : {"{{ l.append(3) }}", "{{ l.pop() }}", "{{ d.update({'b': 2}) }}", "{{ d.clear() }}",
                               "{{ d.setdefault('x', 1) }}", "{{ l.sort() }}"}) {
        SCOPED_TRACE(source);
        EXPECT_NE(expect_failure(source, context).find("is unsafe"), std::string::npos);
    }
}

TEST(TemplateHostile, BrokenSyntax) {
    for (const char* source :
         {"{% if x %}", "{{ x", "{% for x in y %}no end", "{# comment", "{% raw %}x", "{{ 'abc }}", "{% endif %}",
          "{% if %}{% endif %}", "{{ x|no_such_filter }}", "{{ x is no_such_test }}", "{% macro m( %}{% endmacro %}",
          "{{ x[ }}", "{{ {1: } }}", "{% set x %}", "{% else %}", "{% for %}{% endfor %}"}) {
        SCOPED_TRACE(source);
        const std::string message = expect_failure(source);
        EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(message[0]))) << "no line:column in: " << message;
    }
}

TEST(TemplateHostile, OversizedTemplate) {
    TemplateLimits limits;
    limits.max_source_bytes = 1000;
    expect_failure(std::string(2000, 'x'), ordered_json::object(), limits);
}

}  // namespace
}  // namespace powerhouse
