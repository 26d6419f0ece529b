#include "engines_controller.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "remote/remote_engine.h"
#include "remote/remote_url.h"

namespace {

const char* kSetting = "remote_endpoints";
const char* kChoiceSetting = "remote_choice";  // {"endpoint", "model"} chosen last; "": a local model

}  // namespace

EnginesController::EnginesController(powerhouse::store::Store& store, QObject* parent)
    : QObject(parent), m_store(store) {
    load();
}

EnginesController::~EnginesController() {
    *m_cancelled = true;
    for (auto& [id, thread] : m_workers) {
        if (thread.joinable()) thread.join();
    }
}

void EnginesController::load() {
    auto stored = m_store.setting(kSetting);
    if (!stored || !*stored) return;
    const QJsonArray list = QJsonDocument::fromJson(QByteArray::fromStdString(**stored)).array();
    for (const QJsonValue& value : list) {
        const QJsonObject o = value.toObject();
        Endpoint e;
        e.name = o.value("name").toString();
        e.url = o.value("url").toString();
        e.caFile = o.value("ca_file").toString();
        e.hasKey = o.value("has_key").toBool();
        e.metricsUrl = o.value("metrics_url").toString();  // absent before metrics URLs existed
        if (e.name.isEmpty() || e.url.isEmpty()) continue;
        if (auto w = powerhouse::remote::plain_http_warning(e.url.toStdString()))
            e.warning = QString::fromStdString(*w);
        m_endpoints.push_back(std::move(e));
    }
}

void EnginesController::save() {
    QJsonArray list;
    for (const Endpoint& e : m_endpoints) {
        QJsonObject o{{"name", e.name}, {"url", e.url}, {"ca_file", e.caFile}, {"has_key", e.hasKey}};
        if (!e.metricsUrl.isEmpty()) o.insert("metrics_url", e.metricsUrl);
        list.append(o);
    }
    auto saved = m_store.set_setting(kSetting, QJsonDocument(list).toJson(QJsonDocument::Compact).toStdString());
    if (!saved) say(QString::fromStdString(saved.error().message), true);
}

QVariantList EnginesController::endpoints() const {
    QVariantList out;
    for (const Endpoint& e : m_endpoints) {
        out.append(QVariantMap{{"name", e.name},
                               {"url", e.url},
                               {"caFile", e.caFile},
                               {"metricsUrl", e.metricsUrl},
                               {"hasKey", e.hasKey},
                               {"models", e.models},
                               {"status", e.status},
                               {"error", e.error},
                               {"errorDismissed", e.errorDismissed},
                               {"warning", e.warning}});
    }
    return out;
}

QVariantList EnginesController::remoteModels() const {
    QVariantList out;
    for (const Endpoint& e : m_endpoints) {
        for (const QString& model : e.models) {
            out.append(
                QVariantMap{{"endpoint", e.name}, {"model", model}, {"label", model + QStringLiteral(" — ") + e.name}});
        }
    }
    return out;
}

EnginesController::Endpoint* EnginesController::find(const QString& name) {
    for (Endpoint& e : m_endpoints) {
        if (e.name == name) return &e;
    }
    return nullptr;
}

void EnginesController::say(const QString& message, bool isError) {
    m_message = message;
    m_messageIsError = isError;
    emit messageChanged();
}

void EnginesController::listModels(const QString& url, const QString& apiKey, const QString& caFile,
                                   std::function<void(const QStringList&, const QString&)> done) {
    const quint64 id = m_nextWorker++;
    powerhouse::remote::ConnectionOptions options;
    options.api_key = apiKey.toStdString();
    options.ca_file = caFile.toStdString();
    options.first_byte_timeout = std::chrono::seconds(30);
    m_workers[id] = std::thread([this, id, url = url.toStdString(), options = std::move(options),
                                 cancelled = m_cancelled, done = std::move(done)]() mutable {
        QStringList models;
        QString error;
        auto remote = powerhouse::remote::RemoteEngine::create(url, std::move(options));
        if (!remote) {
            error = QString::fromStdString(remote.error().message);
        } else {
            auto listed = remote->list_models([&cancelled] { return cancelled->load(); });
            if (!listed) {
                error = QString::fromStdString(listed.error().message);
            } else {
                for (const std::string& m : *listed) models.append(QString::fromStdString(m));
            }
        }
        // `this` outlives the thread (the destructor joins it).
        QMetaObject::invokeMethod(
            this,
            [this, id, models, error, done = std::move(done)] {
                if (auto w = m_workers.find(id); w != m_workers.end()) {
                    if (w->second.joinable()) w->second.join();
                    m_workers.erase(w);
                }
                done(models, error);
            },
            Qt::QueuedConnection);
    });
}

void EnginesController::testConnection(const QString& url, const QString& apiKey, const QString& caFile) {
    ++m_busy;
    say(tr("Connecting to %1…").arg(url.trimmed()), false);
    listModels(url.trimmed(), apiKey, caFile.trimmed(), [this](const QStringList& models, const QString& error) {
        --m_busy;
        if (!error.isEmpty()) {
            say(error, true);
        } else if (models.isEmpty()) {
            say(tr("Connected, but the server lists no model."), true);
        } else {
            say(tr("Connected: %n model(s): %1", nullptr, static_cast<int>(models.size()))
                    .arg(models.join(QStringLiteral(", "))),
                false);
        }
    });
}

bool EnginesController::validate(const QString& name, const QString& url, const QString& metricsUrl) {
    if (name.isEmpty()) {
        say(tr("Give the endpoint a name."), true);
        return false;
    }
    auto normalized = powerhouse::remote::normalize_base_url(url.toStdString());
    if (!normalized) {
        say(QString::fromStdString(normalized.error().message), true);
        return false;
    }
    if (!metricsUrl.isEmpty()) {
        auto metrics = powerhouse::remote::normalize_metrics_url(metricsUrl.toStdString());
        if (!metrics) {
            say(tr("Metrics URL: %1").arg(QString::fromStdString(metrics.error().message)), true);
            return false;
        }
    }
    return true;
}

void EnginesController::keep(const QString& replacing, Endpoint e) {
    if (auto w = powerhouse::remote::plain_http_warning(e.url.toStdString())) {
        e.warning = QString::fromStdString(*w);
    } else {
        e.warning.clear();
    }
    const bool wasChosen = !m_chosen.isEmpty() && m_chosenEndpoint == replacing;
    if (Endpoint* old = find(replacing)) {
        *old = e;
    } else {
        m_endpoints.push_back(e);
    }
    m_metricsKeys.erase(replacing);
    save();
    emit changed();
    emit metricsSourcesChanged();
    refresh(e.name);
    // The chat holds the old URL and key: hand it the new ones.
    if (wasChosen) choose(e.name, m_chosenModel);
}

void EnginesController::keepWithKey(const QString& replacing, Endpoint e, const QString& key,
                                    std::function<void()> after) {
    ++m_busy;
    say(tr("Storing the key in the system keyring…"), false);
    e.hasKey = true;
    m_keys.write(e.name, key, [this, replacing, e, after = std::move(after)](const QString& error) {
        --m_busy;
        if (!error.isEmpty()) {
            say(error, true);
            return;
        }
        keep(replacing, e);
        after();
    });
}

bool EnginesController::addEndpoint(const QString& name, const QString& url, const QString& apiKey,
                                    const QString& caFile, const QString& metricsUrl) {
    const QString n = name.trimmed();
    if (!validate(n, url.trimmed(), metricsUrl.trimmed())) return false;
    Endpoint e;
    e.name = n;
    e.url = url.trimmed();
    e.caFile = caFile.trimmed();
    e.metricsUrl = metricsUrl.trimmed();
    if (apiKey.isEmpty()) {
        keep(n, e);
        say(tr("Added %1.").arg(n), false);
        // A key kept for an endpoint of this name before goes.
        m_keys.remove(n, [](const QString&) {});
        return true;
    }
    keepWithKey(n, e, apiKey, [this, n] { say(tr("Added %1; its key is in the system keyring.").arg(n), false); });
    return true;
}

bool EnginesController::editEndpoint(const QString& original, const QString& name, const QString& url,
                                     const QString& apiKey, const QString& caFile, const QString& metricsUrl,
                                     bool forgetKey) {
    const Endpoint* old = find(original);
    if (old == nullptr) {
        say(tr("There is no endpoint named %1 any more.").arg(original), true);
        return false;
    }
    const QString n = name.trimmed();
    if (!validate(n, url.trimmed(), metricsUrl.trimmed())) return false;
    if (n != original && find(n) != nullptr) {
        say(tr("An endpoint named %1 exists already: choose another name.").arg(n), true);
        return false;
    }
    Endpoint e;
    e.name = n;
    e.url = url.trimmed();
    e.caFile = caFile.trimmed();
    e.metricsUrl = metricsUrl.trimmed();
    const bool hadKey = old->hasKey;
    const auto saved = [this, n] { say(tr("Saved %1.").arg(n), false); };
    // The key under the old name goes once the endpoint no longer uses it there.
    const auto dropOldKey = [this, original, n, hadKey](bool moved) {
        if (hadKey && (n != original || !moved)) m_keys.remove(original, [](const QString&) {});
    };
    if (!apiKey.isEmpty()) {
        keepWithKey(original, e, apiKey, [saved, dropOldKey] {
            dropOldKey(true);
            saved();
        });
        return true;
    }
    if (!hadKey || forgetKey) {
        keep(original, e);
        dropOldKey(false);
        saved();
        return true;
    }
    if (n == original) {  // the key stays where it is
        e.hasKey = true;
        keep(original, e);
        saved();
        return true;
    }
    // Renamed with its key: read it under the old name, write it under the new one.
    ++m_busy;
    m_keys.read(original, [this, original, e, saved, dropOldKey](const QString& key, bool found, const QString& error) {
        --m_busy;
        if (!error.isEmpty() || !found) {
            say(error.isEmpty() ? tr("The key of %1 is no longer in the system keyring: give it again.").arg(original)
                                : error,
                true);
            return;
        }
        keepWithKey(original, e, key, [saved, dropOldKey] {
            dropOldKey(true);
            saved();
        });
    });
    return true;
}

void EnginesController::removeEndpoint(const QString& name) {
    const auto it =
        std::find_if(m_endpoints.begin(), m_endpoints.end(), [&](const Endpoint& e) { return e.name == name; });
    if (it == m_endpoints.end()) return;
    const bool hadKey = it->hasKey;
    m_endpoints.erase(it);
    m_metricsKeys.erase(name);
    save();
    emit changed();
    emit metricsSourcesChanged();
    if (m_chosenEndpoint == name) clearChoice();
    if (hadKey) {
        m_keys.remove(name, [this](const QString& error) {
            if (!error.isEmpty()) say(error, true);
        });
    }
}

void EnginesController::withKey(const Endpoint& endpoint, std::function<void(const QString&, const QString&)> then) {
    if (!endpoint.hasKey) {
        then({}, {});
        return;
    }
    m_keys.read(endpoint.name, [then = std::move(then)](const QString& key, bool found, const QString& error) {
        if (!error.isEmpty()) {
            then({}, error);
        } else if (!found) {
            then({}, tr("The endpoint's key is no longer in the system keyring: add the endpoint again with its key."));
        } else {
            then(key, {});
        }
    });
}

void EnginesController::fail(Endpoint& e, const QString& error) {
    e.status = QStringLiteral("error");
    e.error = error;
    e.errorDismissed = false;
    emit changed();
}

void EnginesController::dismissEndpointError(const QString& name) {
    Endpoint* e = find(name);
    if (e == nullptr || e->errorDismissed) return;
    e->errorDismissed = true;
    emit changed();
}

void EnginesController::answerFailed(const QString& url, const QString& message) {
    for (Endpoint& e : m_endpoints) {
        if (e.url == url) fail(e, message);
    }
}

void EnginesController::refresh(const QString& name) {
    Endpoint* e = find(name);
    if (e == nullptr) return;
    // The error stays shown while it is tried again; the listing's end replaces it.
    e->status = QStringLiteral("listing");
    emit changed();
    const QString url = e->url;
    withKey(*e, [this, name, url](const QString& key, const QString& keyError) {
        Endpoint* now = find(name);
        if (now == nullptr || now->url != url) return;
        if (!keyError.isEmpty()) {
            fail(*now, keyError);
            return;
        }
        rememberMetricsKey(*now, key);
        listModels(url, key, now->caFile, [this, name, url](const QStringList& models, const QString& error) {
            Endpoint* done = find(name);
            if (done == nullptr || done->url != url) return;  // removed or replaced meanwhile
            done->models = models;
            if (!error.isEmpty()) {
                fail(*done, error);
                return;
            }
            done->status = QStringLiteral("ok");
            done->error.clear();
            done->errorDismissed = false;
            emit changed();
        });
    });
}

void EnginesController::rememberMetricsKey(const Endpoint& e, const QString& key) {
    const bool send = !key.isEmpty() && !e.metricsUrl.isEmpty() &&
                      powerhouse::remote::same_origin(e.url.toStdString(), e.metricsUrl.toStdString());
    const auto known = m_metricsKeys.find(e.name);
    if (send && (known == m_metricsKeys.end() || known->second != key)) {
        m_metricsKeys[e.name] = key;
    } else if (!send && known != m_metricsKeys.end()) {
        m_metricsKeys.erase(known);
    } else {
        return;
    }
    emit metricsSourcesChanged();
}

void EnginesController::refreshModels() {
    for (const Endpoint& e : m_endpoints) refresh(e.name);
}

void EnginesController::choose(const QString& endpoint, const QString& model) {
    Endpoint* e = find(endpoint);
    if (e == nullptr) return;
    withKey(*e, [this, endpoint, model](const QString& key, const QString& error) {
        Endpoint* now = find(endpoint);
        if (now == nullptr) return;
        if (!error.isEmpty()) {
            say(error, true);
            fail(*now, error);  // chosen in the model bar: said on its row of the Models page too
            return;
        }
        // Stored first: refused, the answers stay where they went, as the store says.
        const QJsonObject choice{{"endpoint", endpoint}, {"model", model}};
        auto saved =
            m_store.set_setting(kChoiceSetting, QJsonDocument(choice).toJson(QJsonDocument::Compact).toStdString());
        if (!saved) {
            emit this->error(tr("%1 on %2 was not chosen: the choice could not be saved: %3")
                                 .arg(model, endpoint, QString::fromStdString(saved.error().message)));
            return;
        }
        m_chosen = model + QStringLiteral(" — ") + endpoint;
        m_chosenEndpoint = endpoint;
        m_chosenModel = model;
        emit chosenChanged();
        emit remoteChosen(RemoteTarget{now->name, now->url, now->caFile, key, model});
    });
}

bool EnginesController::restoreChoice() {
    auto stored = m_store.setting(kChoiceSetting);
    if (!stored || !*stored || (*stored)->empty()) return false;
    const QJsonObject choice = QJsonDocument::fromJson(QByteArray::fromStdString(**stored)).object();
    const QString endpoint = choice.value("endpoint").toString();
    const QString model = choice.value("model").toString();
    if (model.isEmpty() || find(endpoint) == nullptr) return false;
    choose(endpoint, model);
    return true;
}

std::vector<MetricsSource> EnginesController::metricsSources() const {
    std::vector<MetricsSource> out;
    for (const Endpoint& e : m_endpoints) {
        if (e.metricsUrl.isEmpty()) continue;
        const auto key = m_metricsKeys.find(e.name);
        out.push_back({e.name.toStdString(), e.metricsUrl.toStdString(), e.caFile.toStdString(),
                       key == m_metricsKeys.end() ? std::string() : key->second.toStdString()});
    }
    return out;
}

void EnginesController::clearChoice() {
    if (m_chosen.isEmpty()) return;
    const QString was = m_chosen;
    // A local model is loading: the remote one is no longer used, whatever the store says.
    m_chosen.clear();
    m_chosenEndpoint.clear();
    m_chosenModel.clear();
    emit chosenChanged();
    if (auto saved = m_store.set_setting(kChoiceSetting, ""); !saved) {
        emit error(tr("%1 could not be forgotten as the model to use, so the next start uses it again: %2")
                       .arg(was, QString::fromStdString(saved.error().message)));
    }
}
