#include "cli/cli_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "support/test_support.h"

namespace powerhouse::test {

std::string quoted(const std::filesystem::path& path) {
    return "'" + path.string() + "'";
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

CliRun run_cli(const std::string& args, const std::optional<std::string>& input) {
    TempDir dir;
    std::string command = std::string(POWERHOUSE_CLI_PATH) + " " + args;
    if (input) {
        write_file(dir / "stdin", *input);
        command += " <" + quoted(dir / "stdin");
    }
    command += " 2>" + quoted(dir / "stderr");
    CliRun run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    std::array<char, 4096> buffer{};
    size_t n;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
    const int raw = ::pclose(pipe);
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    run.err = read_file(dir / "stderr");
    return run;
}

}  // namespace powerhouse::test
