#include "settings_controller.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <thread>

namespace {

QString gib(uint64_t bytes) { return QString::number(static_cast<double>(bytes) / (1ull << 30), 'f', 1) + " GiB"; }

QString range(uint32_t begin, uint32_t end) {
    return end == begin + 1 ? QString::number(begin) : QStringLiteral("%1-%2").arg(begin).arg(end - 1);
}

}  // namespace

SettingsController::SettingsController(powerhouse::store::Store& store, QString dataFolder, QObject* parent)
    : QObject(parent), m_store(store), m_dataFolder(std::move(dataFolder)) {
    load();
    updatePreview();
}

// The applied settings, from the store; a value that is missing or unreadable keeps its default.
void SettingsController::load() {
    const auto text = [this](const char* key) -> QString {
        auto value = m_store.setting(key);
        return value && *value ? QString::fromStdString(**value) : QString();
    };
    const QString mode = text("split_mode");
    m_splitMode = powerhouse::parse_split_mode(mode.toStdString()) ? mode : QStringLiteral("auto");
    const QString experts = text("experts_in_ram");
    m_expertsInRam = powerhouse::parse_experts_in_ram(experts.toStdString()) ? experts : QStringLiteral("auto");
    m_mainGpu = std::max(0, text("main_gpu").toInt());
    const int ctx = text("context_length").toInt();
    m_contextLength = ctx > 0 ? std::clamp(ctx, 256, 1 << 20) : 4096;
    m_kvCacheType = text("kv_cache_type") == QLatin1String("q8_0") ? QStringLiteral("q8_0") : QStringLiteral("f16");
    m_kvCacheTokens = std::clamp(text("kv_cache_tokens").toInt(), 0, 1 << 20);
    const int sequences = text("max_sequences").toInt();
    m_maxSequences = sequences > 0 ? std::min(sequences, 16) : 4;
    m_cpuThreads = std::clamp(text("cpu_threads").toInt(), 0, 1024);
    const QString theme = text("theme");
    m_theme = theme == QLatin1String("light") || theme == QLatin1String("dark") ? theme : QStringLiteral("system");
    m_guessTokens = text("guess_tokens") == QLatin1String("1");
    const double price = text("electricity_price").toDouble();
    m_price = std::isfinite(price) && price > 0 ? price : 0.0;
    const QString policy = text("recovery_policy");
    m_recoveryPolicy = policy == QLatin1String("retry") || policy == QLatin1String("stop") ? policy
                                                                                           : QStringLiteral("replan");
    for (Gpu& g : m_gpus) loadGpu(g);
}

void SettingsController::loadGpu(Gpu& g) {
    g.use = true;
    g.ratio = 1.0;
    g.reserveMiB = 512;
    auto saved = m_store.gpu_settings(g.desc.uuid);
    if (!saved || !*saved) return;
    const QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(**saved)).object();
    g.use = o.value("use").toBool(true);
    const double ratio = o.value("ratio").toDouble(1.0);
    g.ratio = std::isfinite(ratio) && ratio > 0 ? ratio : 1.0;
    g.reserveMiB = std::max(0, o.value("reserve_mib").toInt(512));
}

void SettingsController::revert() {
    const QString theme = m_theme;
    const bool guess = m_guessTokens;
    load();
    emit changed();
    if (theme != m_theme) emit themeChanged();
    if (guess != m_guessTokens) emit guessTokensChanged();
    updatePreview();
}

int SettingsController::cpuCores() const { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

QVariantList SettingsController::gpus() const {
    QVariantList out;
    for (const Gpu& g : m_gpus) {
        const QString uuid = QString::fromStdString(g.desc.uuid);
        out.append(QVariantMap{{"uuid", uuid},
                               {"name", QString::fromStdString(g.desc.name)},
                               {"totalGiB", static_cast<double>(g.desc.total_bytes) / (1ull << 30)},
                               {"use", g.usable(m_failed)},
                               {"failed", m_failed.contains(uuid)},
                               {"failure", m_failed.value(uuid)},
                               {"ratio", g.ratio},
                               {"reserveMiB", g.reserveMiB}});
    }
    return out;
}

void SettingsController::setDevices(const powerhouse::TelemetrySnapshot& snapshot) {
    bool same = snapshot.gpus.size() == m_gpus.size();
    for (size_t i = 0; same && i < m_gpus.size(); ++i) same = m_gpus[i].desc.uuid == snapshot.gpus[i].uuid;
    std::vector<Gpu> gpus;
    for (size_t i = 0; i < snapshot.gpus.size(); ++i) {
        const powerhouse::GpuInfo& info = snapshot.gpus[i];
        Gpu g = same ? m_gpus[i] : Gpu{};
        g.desc.name = info.name;
        g.desc.uuid = info.uuid;
        g.desc.total_bytes = info.memory_total;
        const powerhouse::GpuSample* s = i < snapshot.latest.size() ? &snapshot.latest[i] : nullptr;
        uint64_t free = s != nullptr && s->memory_free ? *s->memory_free : info.memory_total;
        // What this process holds on the GPU is the model's own: it would be freed by a reload.
        if (s != nullptr && s->process_memory) free = std::min(info.memory_total, free + *s->process_memory);
        g.desc.free_bytes = free;
        g.desc.bandwidth_gb_s = powerhouse::guess_bandwidth_gb_s(info.name);
        g.simulated = info.simulated;
        if (!same) loadGpu(g);
        gpus.push_back(g);
    }
    m_gpus = std::move(gpus);
    if (!same) emit changed();
    updatePreview();
}

void SettingsController::setModel(const QString& path) {
    if (path == m_modelPath) return;
    m_modelPath = path;
    m_shape.reset();
    if (!path.isEmpty()) {
        auto shape = powerhouse::read_model_shape(path.toStdString());
        if (shape) {
            m_shape = std::move(shape).value();
        } else {
            emit error(QString::fromStdString(shape.error().message));
        }
    }
    updatePreview();
}

template <class T>
void SettingsController::set(T& field, T value) {
    if (field == value) return;
    field = std::move(value);
    emit changed();
    updatePreview();
}

void SettingsController::setSplitMode(const QString& mode) {
    if (powerhouse::parse_split_mode(mode.toStdString())) set(m_splitMode, mode);
}

void SettingsController::setExpertsInRam(const QString& value) {
    const QString v = value.trimmed();
    if (powerhouse::parse_experts_in_ram(v.toStdString())) set(m_expertsInRam, v);
}

void SettingsController::setMainGpu(int index) {
    if (index >= 0) set(m_mainGpu, index);
}

void SettingsController::setContextLength(int n) { set(m_contextLength, std::clamp(n, 256, 1 << 20)); }

void SettingsController::setKvCacheType(const QString& type) {
    if (type == QLatin1String("f16") || type == QLatin1String("q8_0")) set(m_kvCacheType, type);
}

void SettingsController::setKvCacheTokens(int n) { set(m_kvCacheTokens, std::clamp(n, 0, 1 << 20)); }

void SettingsController::setMaxSequences(int n) { set(m_maxSequences, std::clamp(n, 1, 16)); }

void SettingsController::setCpuThreads(int n) { set(m_cpuThreads, std::clamp(n, 0, 1024)); }

void SettingsController::setElectricityPrice(double price) {
    if (std::isfinite(price) && price >= 0) set(m_price, price);
}

void SettingsController::setTheme(const QString& theme) {
    if (theme == m_theme || (theme != QLatin1String("system") && theme != QLatin1String("light") &&
                             theme != QLatin1String("dark"))) {
        return;
    }
    m_theme = theme;
    emit themeChanged();
    // Nothing to reload: keep it at once, apart from the other settings.
    if (auto saved = m_store.set_setting("theme", theme.toStdString()); !saved) {
        emit error(QString::fromStdString(saved.error().message));
    }
}

void SettingsController::setGuessTokens(bool on) {
    if (on == m_guessTokens) return;
    m_guessTokens = on;
    emit guessTokensChanged();
    // It changes how answers are written, not the model: kept at once, as the theme is.
    if (auto saved = m_store.set_setting("guess_tokens", on ? "1" : "0"); !saved) {
        emit error(QString::fromStdString(saved.error().message));
    }
}

void SettingsController::setRecoveryPolicy(const QString& policy) {
    if (policy == QLatin1String("replan") || policy == QLatin1String("retry") || policy == QLatin1String("stop")) {
        set(m_recoveryPolicy, policy);
    }
}

powerhouse::RecoveryPolicy SettingsController::recovery() const {
    if (m_recoveryPolicy == QLatin1String("retry")) return powerhouse::RecoveryPolicy::retry;
    if (m_recoveryPolicy == QLatin1String("stop")) return powerhouse::RecoveryPolicy::stop;
    return powerhouse::RecoveryPolicy::replan;
}

void SettingsController::markGpuFailed(const QString& uuid, const QString& why) {
    if (uuid.isEmpty() || m_failed.contains(uuid)) return;
    m_failed.insert(uuid, why);
    emit changed();
    updatePreview();
}

void SettingsController::setGpuUse(int index, bool use) {
    if (index < 0 || index >= static_cast<int>(m_gpus.size())) return;
    Gpu& g = m_gpus[static_cast<size_t>(index)];
    // A GPU that failed stays out until the app restarts (the engine would refuse it).
    if (use && m_failed.contains(QString::fromStdString(g.desc.uuid))) {
        emit changed();  // a view that ticked it shows it unticked again
        return;
    }
    set(g.use, use);
}

void SettingsController::setGpuRatio(int index, double ratio) {
    if (index < 0 || index >= static_cast<int>(m_gpus.size()) || !(ratio > 0) || !std::isfinite(ratio)) return;
    set(m_gpus[static_cast<size_t>(index)].ratio, ratio);
}

void SettingsController::setGpuReserve(int index, int mib) {
    if (index < 0 || index >= static_cast<int>(m_gpus.size()) || mib < 0) return;
    set(m_gpus[static_cast<size_t>(index)].reserveMiB, mib);
}

powerhouse::ModelOptions SettingsController::modelOptions() const {
    powerhouse::ModelOptions options;
    options.n_ctx = static_cast<uint32_t>(m_contextLength);
    options.n_threads = m_cpuThreads;
    options.kv_cache_tokens = static_cast<uint32_t>(m_kvCacheTokens);
    options.max_sequences = static_cast<uint32_t>(m_maxSequences);
    options.kv_cache_type = m_kvCacheType == QLatin1String("q8_0") ? powerhouse::KvCacheType::q8_0
                                                                    : powerhouse::KvCacheType::f16;
    if (auto experts = powerhouse::parse_experts_in_ram(m_expertsInRam.toStdString())) options.experts_in_ram = *experts;
    // The GPUs in use, by UUID (runtime numbering differs from NVML's), with their shares;
    // the main GPU's position among them; the largest reserve asked for (the engine keeps
    // one for all). Without a real GPU in use, or a build without CUDA: the CPU.
    QStringList uuids;
    for (const QString& uuid : m_failed.keys()) options.excluded_gpus.push_back(uuid.toStdString());
    for (size_t i = 0; i < m_gpus.size() && powerhouse::has_cuda_backend(); ++i) {
        const Gpu& g = m_gpus[i];
        if (!g.usable(m_failed) || g.simulated) continue;
        if (static_cast<int>(i) == m_mainGpu) options.main_device = static_cast<uint32_t>(uuids.size());
        uuids << QString::fromStdString(g.desc.uuid);
        options.ratios.push_back(g.ratio);
        options.reserve_bytes = std::max(options.reserve_bytes, static_cast<uint64_t>(g.reserveMiB) << 20);
    }
    if (uuids.isEmpty()) {
        options.devices = "cpu";
        options.ratios.clear();
        options.main_device = 0;
        options.reserve_bytes = 0;
        return options;
    }
    options.devices = "cuda:" + uuids.join(QLatin1Char(',')).toStdString();
    if (auto mode = powerhouse::parse_split_mode(m_splitMode.toStdString())) options.split = *mode;
    return options;
}

// The planner's answer for `shape` at `contextLength` with the current choices: in words,
// whether it fits, and the placement for the dashboard. Without a GPU in use, the CPU's
// available memory is the device.
SettingsController::PlanInputs SettingsController::planInputs(int contextLength, bool moe) const {
    PlanInputs in;
    powerhouse::PlanOptions& options = in.options;
    if (auto mode = powerhouse::parse_split_mode(m_splitMode.toStdString())) options.mode = *mode;
    options.n_ctx = static_cast<uint32_t>(contextLength);
    options.max_sequences = static_cast<uint32_t>(m_maxSequences);
    options.kv_type = modelOptions().kv_cache_type;
    options.experts_in_ram = modelOptions().experts_in_ram;
    if (moe) {
        if (auto ram = powerhouse::cpu_devices("cpu"); ram && !ram->empty()) options.ram_bytes = ram->front().free_bytes;
    }
    for (size_t i = 0; i < m_gpus.size(); ++i) {
        powerhouse::DeviceDesc d = m_gpus[i].desc;
        // The planner keeps one reserve for all devices: fold each GPU's own into its free memory.
        const uint64_t own = static_cast<uint64_t>(m_gpus[i].reserveMiB) << 20;
        d.free_bytes = d.free_bytes > own ? d.free_bytes - own : 0;
        in.devices.push_back(d);
        if (m_gpus[i].usable(m_failed)) {
            options.use.push_back(static_cast<uint32_t>(i));
            options.ratios.push_back(m_gpus[i].ratio);
        }
    }
    options.reserve_bytes = 0;  // each GPU's own reserve is folded into its free memory above
    if (!options.use.empty()) {
        const auto main = static_cast<uint32_t>(m_mainGpu);
        options.main_device =
            std::find(options.use.begin(), options.use.end(), main) != options.use.end() ? main : options.use.front();
    }
    return in;
}

SettingsController::Plan SettingsController::planFor(const powerhouse::ModelShape& shape, int contextLength) const {
    Plan out;
    PlanInputs in = planInputs(contextLength, shape.n_expert > 0);
    const std::vector<powerhouse::DeviceDesc>& devices = in.devices;
    const powerhouse::PlanOptions& options = in.options;
    if (options.use.empty()) {
        // On the CPU: one device, the memory available now.
        auto cpu = powerhouse::cpu_devices("cpu");
        if (!cpu) {
            out.text = QString::fromStdString(cpu.error().message);
            return out;
        }
        powerhouse::PlanOptions single;
        single.mode = powerhouse::SplitMode::single;
        single.n_ctx = options.n_ctx;
        // The CPU's KV cache is the pool the conversations share (a GPU's is n_ctx for now).
        single.kv_tokens = static_cast<uint32_t>(m_kvCacheTokens);
        single.max_sequences = options.max_sequences;
        single.kv_type = options.kv_type;
        single.reserve_bytes = 256ull << 20;
        auto plan = powerhouse::plan_devices(shape, *cpu, single);
        const QString why = m_gpus.empty() ? tr("No GPU") : tr("No GPU is selected");
        if (!plan) {
            out.text = tr("%1, and the CPU's memory is too small: %2").arg(why, QString::fromStdString(plan.error().message));
            return out;
        }
        out.fits = true;
        out.text = tr("%1: runs on the CPU, %2 of the %3 available")
                       .arg(why, gib(plan->devices.front().total_bytes()), gib(plan->devices.front().budget_bytes));
        return out;
    }
    auto plan = powerhouse::plan_devices(shape, devices, options);
    if (!plan) {
        out.text = QString::fromStdString(plan.error().message);
        return out;
    }
    out.fits = true;
    QStringList lines;
    lines << tr("%1 split: %2").arg(QString::fromUtf8(powerhouse::split_mode_name(plan->mode)),
                                    QString::fromStdString(plan->reason));
    for (const powerhouse::DeviceAssignment& a : plan->devices) {
        QString part;
        uint32_t first = 0, count = shape.n_layer;
        if (plan->mode == powerhouse::SplitMode::tensor) {
            part = shape.n_expert > 0
                       ? tr("KV heads %1, experts %2").arg(range(a.kv_head_begin, a.kv_head_end),
                                                          range(a.expert_begin, a.expert_end))
                       : tr("KV heads %1, FFN columns %2").arg(range(a.kv_head_begin, a.kv_head_end),
                                                              range(a.ff_begin, a.ff_end));
        } else {
            first = a.first_layer;
            count = a.n_layers;
            part = tr("layers %1").arg(range(a.first_layer, a.first_layer + a.n_layers));
        }
        const QString name = QString::fromStdString(devices[a.device].name);
        lines << tr("GPU %1 (%2): %3 — %4 of %5").arg(a.device).arg(name, part, gib(a.total_bytes()), gib(a.budget_bytes));
        // With experts in RAM the bar shows bytes, the RAM's share among them.
        out.planned.append(QVariantMap{{"gpu", a.device},
                                       {"name", name},
                                       {"part", part},
                                       {"first", first},
                                       {"count", count},
                                       {"tensor", plan->mode == powerhouse::SplitMode::tensor ||
                                                      plan->experts_in_ram_layers > 0},
                                       {"bytes", static_cast<double>(a.total_bytes())}});
    }
    if (plan->experts_in_ram_layers > 0) {
        const QString part = plan->experts_in_ram_layers == 1
                                 ? tr("experts of layer 0")
                                 : tr("experts of layers %1").arg(range(0, plan->experts_in_ram_layers));
        lines << tr("System RAM: %1 — %2, run by the CPU").arg(part, gib(plan->ram_expert_bytes));
        out.planned.append(QVariantMap{{"gpu", -1},
                                       {"name", tr("System RAM")},
                                       {"part", part},
                                       {"first", 0},
                                       {"count", plan->experts_in_ram_layers},
                                       {"tensor", true},
                                       {"bytes", static_cast<double>(plan->ram_expert_bytes)}});
    }
    lines << tr("About %1 tokens/s (from memory bandwidth)").arg(plan->tokens_per_second, 0, 'f', 0);
    out.text = lines.join(QLatin1Char('\n'));
    out.mode = QString::fromUtf8(powerhouse::split_mode_name(plan->mode));
    return out;
}

PlanFit SettingsController::fitFor(const powerhouse::ModelShape& shape) const {
    const Plan plan = planFor(shape, m_contextLength);
    QString suggestion;
    if (!plan.fits) {
        // What would make it fit: the longest shorter context that does, else a smaller file.
        int ctx = 0;
        for (int n = m_contextLength / 2; n >= 256 && ctx == 0; n /= 2) {
            if (planFor(shape, n).fits) ctx = n;
        }
        suggestion = ctx > 0 ? tr("It fits with a context of %1 tokens (Settings, General).").arg(ctx)
                             : tr("It does not fit even with a short context: use a smaller quantization of it, "
                                  "keep less memory free, or add a GPU.");
    }
    return PlanFit{plan.fits, plan.text, plan.mode, suggestion};
}

void SettingsController::updatePreview() {
    Plan plan;
    if (!m_shape) {
        plan.text = tr("Load a model to see where it would go.");
    } else {
        plan = planFor(*m_shape, m_contextLength);
    }
    if (plan.text == m_preview && plan.fits == m_fits && plan.planned == m_planned) return;
    m_preview = plan.text;
    m_fits = plan.fits;
    m_planned = plan.planned;
    emit previewChanged();
}

bool SettingsController::apply() {
    // All in one transaction: refused partway (another program holding the file, a full
    // disk), none is saved, and the dialog keeps every choice to apply again.
    powerhouse::store::Store::SettingValues gpus;
    for (const Gpu& g : m_gpus) {
        // The GPU's other settings (its power limit: PowerController) stay as they are.
        QJsonObject o;
        if (auto kept = m_store.gpu_settings(g.desc.uuid); kept && *kept)
            o = QJsonDocument::fromJson(QByteArray::fromStdString(**kept)).object();
        o.insert("use", g.use);
        o.insert("ratio", g.ratio);
        o.insert("reserve_mib", g.reserveMiB);
        gpus.emplace_back(g.desc.uuid, QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString());
    }
    const std::pair<const char*, QString> values[] = {{"split_mode", m_splitMode},
                                                      {"experts_in_ram", m_expertsInRam},
                                                      {"main_gpu", QString::number(m_mainGpu)},
                                                      {"context_length", QString::number(m_contextLength)},
                                                      {"kv_cache_type", m_kvCacheType},
                                                      {"kv_cache_tokens", QString::number(m_kvCacheTokens)},
                                                      {"max_sequences", QString::number(m_maxSequences)},
                                                      {"cpu_threads", QString::number(m_cpuThreads)},
                                                      {"electricity_price", QString::number(m_price)},
                                                      {"recovery_policy", m_recoveryPolicy},
                                                      {"theme", m_theme}};
    powerhouse::store::Store::SettingValues settings;
    for (const auto& [key, value] : values) settings.emplace_back(key, value.toStdString());
    if (auto saved = m_store.set_settings(settings, gpus); !saved) {
        emit error(QString::fromStdString(saved.error().message));
        return false;
    }
    emit applied();
    return true;
}
