// The Prometheus text parser and the mapping to remote GPUs and engine figures, on samples in
// the formats of NVIDIA's DCGM exporter, vLLM, SGLang, llama.cpp's server and Powerhouse's own
// /metrics, read from files and fetched from 127.0.0.1.
//
// Fixtures (tests/data/remote), written from the exporters' documentation:
//   dcgm_exporter.prom      github.com/NVIDIA/dcgm-exporter: README's quickstart output (HELP/
//                           TYPE per field, the blank 9223372036854775794 for MEMORY_TEMP) and
//                           etc/default-counters.csv's fields, with the labels the exporter
//                           sets (gpu, UUID, pci_bus_id, device, modelName, Hostname,
//                           DCGM_FI_DRIVER_VERSION); two H100s on gpu-node-1.
//   dcgm_exporter_mig.prom  the same exporter on an A100 split into MIG instances (GPU_I_ID,
//                           GPU_I_PROFILE labels on the instance series), a blank power reading.
//   vllm_v1.prom            docs.vllm.ai "Production Metrics" (V1 engine): prometheus_client's
//                           output with engine and model_name labels, two data-parallel engines,
//                           counters with their _created gauges, a histogram, Python's own.
//   sglang.prom             SGLang's collector and scheduler source (python/sglang/srt/...):
//                           two data-parallel attention replicas, prometheus_client's
//                           multiprocess output.
//   llama_cpp_server.prom   llama.cpp's tools/server/server.cpp /metrics handler, after the
//                           KV-cache gauges were removed.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "http_test_server.h"
#include "remote/prometheus.h"
#include "remote/remote_engine.h"
#include "remote/remote_gpus.h"
#include "support/test_support.h"

namespace powerhouse::remote {
namespace {

std::string fixture(const std::string& name) {
    return test::read_file(test::data_dir() / "remote" / name);
}

constexpr uint64_t kMiB = 1024 * 1024;

TEST(Prometheus, ReadsTheTextFormatsCorners) {
    const PrometheusText t = parse_prometheus(
        "# HELP http_requests_total The total number of HTTP requests.\\nSecond line \\\\ done\n"
        "# TYPE http_requests_total counter\n"
        "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
        "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
        "\n"
        "# A normal comment.\n"
        "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} "
        "1.458255915e9\n"
        "metric_without_timestamp_and_labels 12.47\n"
        "something_weird{problem=\"division by zero\"} +Inf -3982045\n"
        "not_a_number NaN\n"
        "negative_infinity{a=\"b\",} -Inf\n"
        "spaces_around { a = \"1\" , b=\"2\" } 7\n"
        "   \t\n"
        "broken{unclosed=\"value} 1\n"
        "no_value{a=\"b\"}\n"
        "bad_value 12abc\n");
    ASSERT_EQ(t.samples.size(), 8u);
    EXPECT_EQ(t.help.at("http_requests_total"), "The total number of HTTP requests.\nSecond line \\ done");
    EXPECT_EQ(t.types.at("http_requests_total"), "counter");
    EXPECT_EQ(t.samples[0].name, "http_requests_total");
    EXPECT_EQ(t.samples[0].label("method"), "post");
    EXPECT_EQ(t.samples[0].label("code"), "200");
    EXPECT_FALSE(t.samples[0].label("missing"));
    EXPECT_EQ(t.samples[0].value, 1027);
    EXPECT_EQ(t.samples[0].timestamp_ms, 1395066363000);
    EXPECT_EQ(t.samples[1].value, 3);
    EXPECT_EQ(t.samples[2].label("path"), "C:\\DIR\\FILE.TXT");
    EXPECT_EQ(t.samples[2].label("error"), "Cannot find file:\n\"FILE.TXT\"");
    EXPECT_DOUBLE_EQ(t.samples[2].value, 1.458255915e9);
    EXPECT_FALSE(t.samples[3].timestamp_ms);
    EXPECT_TRUE(t.samples[3].labels.empty());
    EXPECT_TRUE(std::isinf(t.samples[4].value) && t.samples[4].value > 0);
    EXPECT_EQ(t.samples[4].timestamp_ms, -3982045);
    EXPECT_TRUE(std::isnan(t.samples[5].value));
    EXPECT_TRUE(std::isinf(t.samples[6].value) && t.samples[6].value < 0);
    EXPECT_EQ(t.samples[6].labels.size(), 1u);
    EXPECT_EQ(t.samples[7].label("a"), "1");
    EXPECT_EQ(t.samples[7].label("b"), "2");
    EXPECT_EQ(t.skipped_lines, 3u);
    ASSERT_EQ(t.problems.size(), 3u);
    EXPECT_EQ(t.problems[0], "line 14: label unclosed's value has no closing quote");
    EXPECT_EQ(t.problems[1], "line 15: no value");
    EXPECT_EQ(t.problems[2], "line 16: '12abc' is not a number");
}

TEST(Prometheus, ValuesAreGoFloats) {
    EXPECT_EQ(parse_prometheus_value("1e3"), 1000.0);
    EXPECT_EQ(parse_prometheus_value("-2.5E-1"), -0.25);
    EXPECT_EQ(parse_prometheus_value("+7"), 7.0);
    EXPECT_TRUE(std::isinf(*parse_prometheus_value("Inf")));
    EXPECT_TRUE(std::isinf(*parse_prometheus_value("1e999")));
    EXPECT_EQ(parse_prometheus_value("1e-999"), 0.0);
    EXPECT_TRUE(std::isnan(*parse_prometheus_value("nan")));
    EXPECT_FALSE(parse_prometheus_value(""));
    EXPECT_FALSE(parse_prometheus_value("--1"));
    EXPECT_FALSE(parse_prometheus_value("0x10"));
    // OpenMetrics ends with # EOF; nothing after it counts.
    EXPECT_EQ(parse_prometheus("a 1\n# EOF\nb 2\n").samples.size(), 1u);
}

TEST(RemoteGpus, DcgmExporterGpusWithTheirHost) {
    const std::vector<RemoteHost> hosts =
        remote_gpus(parse_prometheus(fixture("dcgm_exporter.prom")).samples, "10.0.0.9");
    ASSERT_EQ(hosts.size(), 1u);
    const RemoteHost& h = hosts[0];
    EXPECT_EQ(h.host, "gpu-node-1");  // the Hostname label, not the URL's host
    EXPECT_EQ(h.sources, std::vector<std::string>{"DCGM exporter"});
    ASSERT_EQ(h.gpus.size(), 2u);
    ASSERT_EQ(h.latest.size(), 2u);
    const GpuInfo& g0 = h.gpus[0];
    const GpuSample& s0 = h.latest[0];
    EXPECT_EQ(g0.index, 0u);
    EXPECT_EQ(g0.uuid, "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
    EXPECT_EQ(g0.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g0.pci_bus_id, "0000:18:00.0");
    EXPECT_FALSE(g0.simulated);
    EXPECT_EQ(g0.memory_total, (77972u + 3107u) * kMiB);
    EXPECT_EQ(s0.memory_used, 77972u * kMiB);
    EXPECT_EQ(s0.memory_free, 3107u * kMiB);
    EXPECT_EQ(s0.gpu_utilization, 97u);
    EXPECT_EQ(s0.memory_utilization, 58u);
    EXPECT_EQ(s0.temperature_c, 61u);
    EXPECT_DOUBLE_EQ(*s0.power_w, 512.337);
    EXPECT_EQ(s0.sm_clock_mhz, 1980u);
    EXPECT_EQ(s0.memory_clock_mhz, 2619u);
    EXPECT_DOUBLE_EQ(*s0.energy_j, 8123456789.012);
    EXPECT_TRUE(s0.responding);
    EXPECT_EQ(h.gpus[1].index, 1u);
    EXPECT_EQ(h.latest[1].gpu_utilization, 0u);
    EXPECT_EQ(h.latest[1].memory_used, 0u);
    EXPECT_EQ(h.gpus[1].memory_total, 81004u * kMiB);
    EXPECT_TRUE(h.engines.empty());
}

TEST(RemoteGpus, MigInstancesAndBlankReadings) {
    const std::vector<RemoteHost> hosts =
        remote_gpus(parse_prometheus(fixture("dcgm_exporter_mig.prom")).samples, "10.0.0.9");
    ASSERT_EQ(hosts.size(), 1u);
    const RemoteHost& h = hosts[0];
    EXPECT_EQ(h.host, "gpu-node-2");
    ASSERT_EQ(h.gpus.size(), 3u);  // the GPU, then its two instances
    EXPECT_EQ(h.gpus[0].name, "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(h.latest[0].temperature_c, 44u);
    EXPECT_FALSE(h.latest[0].power_w);  // DCGM's blank float: no reading
    EXPECT_EQ(h.gpus[1].name, "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
    EXPECT_EQ(h.latest[1].memory_used, 10468u * kMiB);
    EXPECT_EQ(h.gpus[1].memory_total, (10468u + 9500u) * kMiB);
    EXPECT_EQ(h.latest[2].memory_used, 0u);
}

TEST(RemoteGpus, SeveralHostsFromOneEndpoint) {
    // A Prometheus federation (or one scrape of several exporters) mixes hosts.
    const std::vector<RemoteHost> hosts =
        remote_gpus(parse_prometheus(fixture("dcgm_exporter.prom") + fixture("dcgm_exporter_mig.prom")).samples, "");
    ASSERT_EQ(hosts.size(), 2u);
    EXPECT_EQ(hosts[0].host, "gpu-node-1");
    EXPECT_EQ(hosts[0].gpus.size(), 2u);
    EXPECT_EQ(hosts[1].host, "gpu-node-2");
    EXPECT_EQ(hosts[1].gpus.size(), 3u);
}

TEST(RemoteGpus, VllmEngineFigures) {
    const std::vector<RemoteHost> hosts = remote_gpus(parse_prometheus(fixture("vllm_v1.prom")).samples, "10.0.0.7");
    ASSERT_EQ(hosts.size(), 1u);
    EXPECT_EQ(hosts[0].host, "10.0.0.7");
    EXPECT_TRUE(hosts[0].gpus.empty());
    ASSERT_EQ(hosts[0].engines.size(), 1u);
    const RemoteEngineFigures& e = hosts[0].engines[0];
    EXPECT_EQ(e.engine, "vLLM");
    EXPECT_EQ(e.model, "meta-llama/Llama-3.1-70B-Instruct");
    EXPECT_EQ(e.requests_running, 8.0);  // two engines add up
    EXPECT_EQ(e.requests_waiting, 2.0);
    EXPECT_DOUBLE_EQ(*e.kv_cache_usage, 0.375);  // and their caches average
    EXPECT_EQ(e.generation_tokens_total, 152000.0);
    EXPECT_EQ(e.prompt_tokens_total, 78330.0);
    EXPECT_FALSE(e.tokens_per_second);
    // tokens/s from two readings of the counter.
    EXPECT_EQ(counter_rate(152000.0, 152600.0, 2.0), 300.0);
    EXPECT_FALSE(counter_rate(152000.0, 10.0, 2.0));  // restarted
    EXPECT_FALSE(counter_rate(std::nullopt, 10.0, 2.0));
    // vLLM before V1: gpu_cache_usage_perc, no engine label.
    const std::vector<RemoteHost> v0 = remote_gpus(
        parse_prometheus(
            "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.9\nvllm:num_requests_running{model_name=\"m\"} 1.0\n")
            .samples);
    ASSERT_EQ(v0.size(), 1u);
    ASSERT_EQ(v0[0].engines.size(), 1u);
    EXPECT_DOUBLE_EQ(*v0[0].engines[0].kv_cache_usage, 0.9);
}

TEST(RemoteGpus, SglangEngineFigures) {
    const PrometheusText text = parse_prometheus(fixture("sglang.prom"));
    EXPECT_EQ(text.skipped_lines, 0u);
    EXPECT_EQ(text.types.at("sglang:num_running_reqs"), "gauge");
    EXPECT_EQ(text.types.at("sglang:prompt_tokens_total"), "counter");
    const std::vector<RemoteHost> hosts = remote_gpus(text.samples, "10.0.0.8");
    ASSERT_EQ(hosts.size(), 1u);
    EXPECT_EQ(hosts[0].host, "10.0.0.8");
    EXPECT_EQ(hosts[0].sources, std::vector<std::string>{"SGLang"});
    EXPECT_TRUE(hosts[0].gpus.empty());
    ASSERT_EQ(hosts[0].engines.size(), 1u);
    const RemoteEngineFigures& e = hosts[0].engines[0];
    EXPECT_EQ(e.engine, "SGLang");
    EXPECT_EQ(e.model, "deepseek-ai/DeepSeek-V3");
    // Two data-parallel replicas add up; num_running_reqs_offline_batch and
    // num_grammar_queue_reqs are other gauges, not counted.
    EXPECT_EQ(e.requests_running, 25.0);
    EXPECT_EQ(e.requests_waiting, 3.0);
    EXPECT_NEAR(*e.kv_cache_usage, 0.55, 1e-12);      // token_usage 0.62 and 0.48 average
    EXPECT_NEAR(*e.tokens_per_second, 1151.3, 1e-9);  // gen_throughput 612.4 + 538.9
    EXPECT_EQ(e.generation_tokens_total, 987654.0);
    EXPECT_EQ(e.prompt_tokens_total, 4213987.0);  // written 4.213987e+06
}

TEST(RemoteGpus, SglangRanksOfOneReplicaCountOnce) {
    // With enable_metrics_for_all_schedulers every TP rank reports its replica's figures;
    // other labels (dp_rank, the tokenizer's priority) are parts that add up.
    const std::string text =
        "sglang:num_running_reqs{dp_rank=\"0\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} 6.0\n"
        "sglang:num_running_reqs{dp_rank=\"0\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"1\"} 6.0\n"
        "sglang:num_running_reqs{dp_rank=\"1\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"2\"} 4.0\n"
        "sglang:num_running_reqs{dp_rank=\"1\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"3\"} 4.0\n"
        "sglang:token_usage{dp_rank=\"0\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} 0.5\n"
        "sglang:token_usage{dp_rank=\"0\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"1\"} 0.5\n"
        "sglang:token_usage{dp_rank=\"1\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"2\"} 0.2\n"
        "sglang:prompt_tokens_total{model_name=\"m\",priority=\"\"} 100.0\n"
        "sglang:prompt_tokens_total{model_name=\"m\",priority=\"1\"} 30.0\n"
        "sglang:num_queue_reqs{model_name=\"other\",pp_rank=\"0\",tp_rank=\"0\"} 2.0\n";
    const std::vector<RemoteHost> hosts = remote_gpus(parse_prometheus(text).samples, "h");
    ASSERT_EQ(hosts.size(), 1u);
    ASSERT_EQ(hosts[0].engines.size(), 2u);  // one per model
    const RemoteEngineFigures& m = hosts[0].engines[0];
    EXPECT_EQ(m.model, "m");
    EXPECT_EQ(m.requests_running, 10.0);
    EXPECT_DOUBLE_EQ(*m.kv_cache_usage, 0.35);
    EXPECT_EQ(m.prompt_tokens_total, 130.0);
    EXPECT_FALSE(m.requests_waiting);
    EXPECT_EQ(hosts[0].engines[1].model, "other");
    EXPECT_EQ(hosts[0].engines[1].requests_waiting, 2.0);
}

TEST(RemoteGpus, LlamaCppServerFigures) {
    const PrometheusText text = parse_prometheus(fixture("llama_cpp_server.prom"));
    EXPECT_EQ(text.skipped_lines, 0u);
    EXPECT_EQ(text.types.at("llamacpp:requests_processing"), "gauge");
    const std::vector<RemoteHost> hosts = remote_gpus(text.samples, "10.0.0.9");
    ASSERT_EQ(hosts.size(), 1u);
    EXPECT_EQ(hosts[0].sources, std::vector<std::string>{"llama.cpp"});
    ASSERT_EQ(hosts[0].engines.size(), 1u);
    const RemoteEngineFigures& e = hosts[0].engines[0];
    EXPECT_EQ(e.engine, "llama.cpp");
    EXPECT_EQ(e.model, "");  // llama-server names no model in its metrics
    EXPECT_EQ(e.requests_running, 3.0);
    EXPECT_EQ(e.requests_waiting, 1.0);
    EXPECT_FALSE(e.kv_cache_usage);  // this server no longer reports it
    EXPECT_DOUBLE_EQ(*e.tokens_per_second, 51.5443);
    EXPECT_EQ(e.generation_tokens_total, 264518.0);
    EXPECT_EQ(e.prompt_tokens_total, 1842120.0);  // 1.84212e+06: the server's six digits

    // Servers before ggml-org/llama.cpp#13660 report the KV cache's share of the context.
    const std::vector<RemoteHost> older =
        remote_gpus(parse_prometheus("# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.\n"
                                     "# TYPE llamacpp:kv_cache_usage_ratio gauge\n"
                                     "llamacpp:kv_cache_usage_ratio 0.4375\n"
                                     "# HELP llamacpp:kv_cache_tokens KV-cache tokens.\n"
                                     "# TYPE llamacpp:kv_cache_tokens gauge\n"
                                     "llamacpp:kv_cache_tokens 3584\n"
                                     "llamacpp:requests_processing 2\n"
                                     "llamacpp:requests_deferred 0\n")
                        .samples);
    ASSERT_EQ(older.size(), 1u);
    ASSERT_EQ(older[0].engines.size(), 1u);
    EXPECT_DOUBLE_EQ(*older[0].engines[0].kv_cache_usage, 0.4375);
    EXPECT_EQ(older[0].engines[0].requests_running, 2.0);
    EXPECT_EQ(older[0].engines[0].requests_waiting, 0.0);
}

TEST(RemoteGpus, LlamaCppTokensPerSecondIsTheGenerationGaugeNotTheCounters) {
    // tokens/s is predicted_tokens_seconds: not prompt_tokens_seconds (2019.1, prompt speed) nor
    // tokens_predicted_seconds_total (5131.86, seconds spent generating).
    const std::vector<RemoteHost> first = remote_gpus(parse_prometheus(fixture("llama_cpp_server.prom")).samples, "h");
    const RemoteEngineFigures& a = first.at(0).engines.at(0);
    EXPECT_DOUBLE_EQ(*a.tokens_per_second, 51.5443);
    // The gauge is one request's speed; with three slots busy the counters, read 10 s apart,
    // give the server's total.
    const std::vector<RemoteHost> second = remote_gpus(
        parse_prometheus("llamacpp:tokens_predicted_total 265988\nllamacpp:predicted_tokens_seconds 51.6012\n").samples,
        "h");
    const RemoteEngineFigures& b = second.at(0).engines.at(0);
    EXPECT_DOUBLE_EQ(*b.tokens_per_second, 51.6012);
    EXPECT_EQ(counter_rate(a.generation_tokens_total, b.generation_tokens_total, 10.0), 147.0);
    // Without the gauge there is no tokens/s of the engine's own, only the counters.
    const std::vector<RemoteHost> counters_only = remote_gpus(
        parse_prometheus("llamacpp:prompt_tokens_seconds 2019.1\nllamacpp:tokens_predicted_seconds_total 5131.86\n"
                         "llamacpp:tokens_predicted_total 264518\n")
            .samples,
        "h");
    const RemoteEngineFigures& c = counters_only.at(0).engines.at(0);
    EXPECT_FALSE(c.tokens_per_second);
    EXPECT_EQ(c.generation_tokens_total, 264518.0);
}

TEST(RemoteGpus, PowerhouseMetrics) {
    // app/server/api_server.cpp's metrics() as it writes them.
    const std::string text =
        "# TYPE powerhouse_generation_tokens_per_second gauge\n"
        "powerhouse_generation_tokens_per_second 87.50\n"
        "powerhouse_sequences_running 2\n"
        "powerhouse_sequences_waiting 1\n"
        "powerhouse_kv_blocks{state=\"used\"} 16\n"
        "powerhouse_kv_blocks{state=\"total\"} 64\n"
        "powerhouse_generated_tokens_total 1200\n"
        "powerhouse_gpu_up{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 1\n"
        "powerhouse_gpu_up{gpu=\"1\",uuid=\"GPU-b\",name=\"Name with \\\"quotes\\\"\",simulated=\"false\"} 0\n"
        "powerhouse_gpu_utilization_ratio{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 0.42\n"
        "powerhouse_gpu_temperature_celsius{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 55\n"
        "powerhouse_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 1073741824\n"
        "powerhouse_gpu_memory_total_bytes{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 25769803776\n"
        "powerhouse_gpu_memory_total_bytes{gpu=\"1\",uuid=\"GPU-b\",name=\"Name with "
        "\\\"quotes\\\"\",simulated=\"false\"} 1024\n"
        "powerhouse_gpu_power_watts{gpu=\"0\",uuid=\"GPU-a\",name=\"RTX 4090\",simulated=\"true\"} 120.5\n";
    const std::vector<RemoteHost> hosts = remote_gpus(parse_prometheus(text).samples, "workstation");
    ASSERT_EQ(hosts.size(), 1u);
    const RemoteHost& h = hosts[0];
    EXPECT_EQ(h.host, "workstation");
    ASSERT_EQ(h.gpus.size(), 2u);
    EXPECT_EQ(h.gpus[0].name, "RTX 4090");
    EXPECT_TRUE(h.gpus[0].simulated);
    EXPECT_EQ(h.gpus[0].memory_total, 25769803776u);
    EXPECT_EQ(h.latest[0].memory_used, 1073741824u);
    EXPECT_EQ(h.latest[0].memory_free, 25769803776u - 1073741824u);
    EXPECT_EQ(h.latest[0].gpu_utilization, 42u);
    EXPECT_EQ(h.latest[0].temperature_c, 55u);
    EXPECT_EQ(h.latest[0].power_w, 120.5);
    EXPECT_EQ(h.gpus[1].name, "Name with \"quotes\"");
    EXPECT_FALSE(h.gpus[1].simulated);
    EXPECT_FALSE(h.latest[1].responding);
    EXPECT_FALSE(h.latest[1].problem.empty());
    ASSERT_EQ(h.engines.size(), 1u);
    EXPECT_EQ(h.engines[0].engine, "Powerhouse");
    EXPECT_EQ(h.engines[0].tokens_per_second, 87.5);
    EXPECT_EQ(h.engines[0].requests_running, 2.0);
    EXPECT_EQ(h.engines[0].requests_waiting, 1.0);
    EXPECT_DOUBLE_EQ(*h.engines[0].kv_cache_usage, 0.25);
    EXPECT_EQ(h.engines[0].generation_tokens_total, 1200.0);
}

class MetricsOverHttp : public ::testing::Test {
protected:
    void SetUp() override {
        server_ = std::make_unique<test::HttpTestServer>(
            POWERHOUSE_REMOTE_TEST_DIR "/openai_fault_server.py",
            std::vector<std::string>{"--fixtures", (test::data_dir() / "remote").string()});
        ASSERT_TRUE(server_->running());
    }
    std::unique_ptr<test::HttpTestServer> server_;
};

TEST_F(MetricsOverHttp, FetchesAndMapsEachExportersFormat) {
    Result<PrometheusText> dcgm = fetch_metrics(server_->url("/metrics/dcgm_exporter"));
    ASSERT_TRUE(dcgm.ok()) << dcgm.error().message;
    EXPECT_EQ(dcgm->samples.size(), parse_prometheus(fixture("dcgm_exporter.prom")).samples.size());
    EXPECT_EQ(dcgm->types.at("DCGM_FI_DEV_GPU_TEMP"), "gauge");
    EXPECT_EQ(remote_gpus(dcgm->samples, "127.0.0.1").at(0).gpus.size(), 2u);

    Result<PrometheusText> vllm = fetch_metrics(server_->url("/metrics/vllm_v1"));
    ASSERT_TRUE(vllm.ok()) << vllm.error().message;
    const std::vector<RemoteHost> hosts = remote_gpus(vllm->samples, "127.0.0.1");
    ASSERT_EQ(hosts.size(), 1u);
    EXPECT_EQ(hosts[0].host, "127.0.0.1");
    EXPECT_EQ(hosts[0].engines.at(0).requests_running, 8.0);

    for (const auto& [name, engine] : {std::pair<std::string, std::string>{"sglang", "SGLang"},
                                       std::pair<std::string, std::string>{"llama_cpp_server", "llama.cpp"}}) {
        Result<PrometheusText> served = fetch_metrics(server_->url("/metrics/" + name));
        ASSERT_TRUE(served.ok()) << name << ": " << served.error().message;
        EXPECT_EQ(remote_gpus(served->samples, "127.0.0.1").at(0).engines.at(0).engine, engine);
    }
}

TEST_F(MetricsOverHttp, WhatIsNotAMetricsEndpointIsSaid) {
    Result<PrometheusText> missing = fetch_metrics(server_->url("/metrics/no_such_fixture"));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("HTTP 404"), std::string::npos) << missing.error().message;
    EXPECT_NE(missing.error().message.find("--enable-metrics"), std::string::npos) << "where metrics are served";
    // JSON is not Prometheus text.
    Result<PrometheusText> json = fetch_metrics(server_->url("/ok/v1/models"));
    ASSERT_FALSE(json.ok());
    EXPECT_EQ(json.error().code, ErrorCode::format);
    EXPECT_NE(json.error().message.find("no Prometheus samples"), std::string::npos) << json.error().message;
}

}  // namespace
}  // namespace powerhouse::remote
