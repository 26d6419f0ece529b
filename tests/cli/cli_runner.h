// Runs the powerhouse-cli executable as a user would: arguments through the shell,
// optional text on stdin, stdout and stderr captured separately.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace powerhouse::test {

struct CliRun {
    int status = -1;  // exit status; -1 when the program did not exit normally
    std::string out;
    std::string err;
};

// `args` are shell-quoted by the caller (see quoted()). Without `input`, stdin is inherited.
CliRun run_cli(const std::string& args, const std::optional<std::string>& input = std::nullopt);

// A path in single quotes, for the shell.
std::string quoted(const std::filesystem::path& path);

// Whether `text` (a run's output) contains `part`.
bool contains(const std::string& text, const std::string& part);

}  // namespace powerhouse::test
