// The store's queries on messages: adding, streaming and finishing answers, reading them back,
// deleting, edit-and-resend, and an import's conversations with their messages. The rest of
// the store (opening, migrations, conversations, settings, models) is store.cpp.
#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "store/store.h"
#include "store/store_impl.h"

namespace powerhouse::store {

namespace {

MessageState parse_state(const std::string& text) {
    if (text == "streaming") return MessageState::streaming;
    if (text == "stopped") return MessageState::stopped;
    if (text == "failed") return MessageState::failed;
    if (text == "interrupted") return MessageState::interrupted;
    return MessageState::complete;
}

// A message's recovery notes as the recoveries_json column holds them: a JSON array, or ''
// when there are none (migration 7).
std::string recoveries_json(const std::vector<MessageRecovery>& recoveries) {
    if (recoveries.empty()) return {};
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const MessageRecovery& r : recoveries) {
        out.push_back(
            {{"at_token", r.at_token}, {"failed", r.failed}, {"cause", r.cause}, {"continued_on", r.continued_on}});
    }
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Only this file writes the column; should it hold something else (edited by hand), the
// notes that cannot be read are left out rather than the message made unreadable.
std::vector<MessageRecovery> parse_recoveries(const std::string& text) {
    std::vector<MessageRecovery> out;
    if (text.empty()) return out;
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_array()) return out;
    for (const nlohmann::json& r : doc) {
        if (!r.is_object()) continue;
        MessageRecovery note;
        if (const auto at = r.find("at_token"); at != r.end() && at->is_number_integer()) {
            note.at_token = at->get<int64_t>();
        }
        for (auto [key, field] : {std::pair{"failed", &note.failed}, std::pair{"cause", &note.cause},
                                  std::pair{"continued_on", &note.continued_on}}) {
            if (const auto v = r.find(key); v != r.end() && v->is_string()) *field = v->get<std::string>();
        }
        out.push_back(std::move(note));
    }
    return out;
}

const char* kMessageColumns =
    "id, conversation_id, role, content, state, error, model, prompt_tokens, generated_tokens, ttft_ms, "
    "tokens_per_second, energy_joules, created_ms, updated_ms, reused_tokens, engine, recoveries_json, throttle, "
    "reasoning, drafted_tokens, accepted_tokens, tool_calls";

Message read_message(SQLite::Statement& q) {
    Message m;
    m.id = q.getColumn(0).getInt64();
    m.conversation_id = q.getColumn(1).getInt64();
    m.role = q.getColumn(2).getString();
    m.content = q.getColumn(3).getString();
    m.state = parse_state(q.getColumn(4).getString());
    m.error = q.getColumn(5).getString();
    m.stats.model = q.getColumn(6).getString();
    m.stats.prompt_tokens = q.getColumn(7).getInt64();
    m.stats.generated_tokens = q.getColumn(8).getInt64();
    m.stats.ttft_ms = q.getColumn(9).getDouble();
    m.stats.tokens_per_second = q.getColumn(10).getDouble();
    if (!q.getColumn(11).isNull()) m.stats.energy_joules = q.getColumn(11).getDouble();
    m.created_ms = q.getColumn(12).getInt64();
    m.updated_ms = q.getColumn(13).getInt64();
    m.stats.reused_tokens = q.getColumn(14).getInt64();
    m.stats.engine = q.getColumn(15).getString();
    m.stats.recoveries = parse_recoveries(q.getColumn(16).getString());
    m.stats.throttle = q.getColumn(17).getString();
    m.reasoning = q.getColumn(18).getString();
    m.stats.drafted_tokens = q.getColumn(19).getInt64();
    m.stats.accepted_tokens = q.getColumn(20).getInt64();
    m.tool_calls = q.getColumn(21).getString();
    return m;
}

// The roles a stored message may have.
Result<void> check_role(const std::string& role) {
    if (role != "system" && role != "user" && role != "assistant") {
        return make_error(ErrorCode::invalid_argument,
                          fmt::format("a message's role is system, user or assistant, not '{}'", role));
    }
    return {};
}

}  // namespace

std::string recovery_text(const MessageRecovery& r) {
    const std::string when =
        r.at_token > 0 ? fmt::format("at token {}", r.at_token) : std::string("before its first token");
    std::string text =
        fmt::format("Continued on {} after {} failed {}", r.continued_on.empty() ? "other devices" : r.continued_on,
                    r.failed.empty() ? "a device" : r.failed, when);
    if (!r.cause.empty()) text += ": " + r.cause;
    return text;
}

std::string guesses_text(const MessageStats& stats) {
    if (stats.drafted_tokens <= 0) return {};
    return fmt::format("{} of {} {} kept", stats.accepted_tokens, stats.drafted_tokens,
                       stats.drafted_tokens == 1 ? "guess" : "guesses");
}

const char* message_state_name(MessageState state) {
    switch (state) {
        case MessageState::complete:
            return "complete";
        case MessageState::streaming:
            return "streaming";
        case MessageState::stopped:
            return "stopped";
        case MessageState::failed:
            return "failed";
        case MessageState::interrupted:
            return "interrupted";
    }
    return "complete";
}

Message Store::Impl::insert_message(int64_t conversation_id, const std::string& role, const std::string& content,
                                    MessageState state, int64_t at) {
    SQLite::Statement q(db,
                        "INSERT INTO messages (conversation_id, role, content, state, created_ms, "
                        "updated_ms) VALUES (?, ?, ?, ?, ?, ?)");
    q.bind(1, conversation_id);
    q.bind(2, role);
    q.bind(3, content);
    q.bind(4, message_state_name(state));
    q.bind(5, at);
    q.bind(6, at);
    q.exec();
    Message m;
    m.id = db.getLastInsertRowid();
    touch(conversation_id, at);
    m.conversation_id = conversation_id;
    m.role = role;
    m.content = content;
    m.state = state;
    m.created_ms = m.updated_ms = at;
    return m;
}

Result<Message> Store::add_message(int64_t conversation_id, const std::string& role, const std::string& content,
                                   MessageState state) {
    PH_TRY(check_role(role));
    return impl_->guarded([&]() -> Result<Message> {
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        const int64_t at = now_ms();
        SQLite::Statement exists(impl_->db, "SELECT 1 FROM conversations WHERE id = ?");
        exists.bind(1, conversation_id);
        if (!exists.executeStep()) {
            return make_error(ErrorCode::invalid_argument, fmt::format("no conversation {}", conversation_id));
        }
        Message m = impl_->insert_message(conversation_id, role, content, state, at);
        transaction.commit();
        return m;
    });
}

// A reasoning of std::nullopt binds NULL, which `COALESCE(?, reasoning)` turns into the
// stored one: the column itself is never NULL.
static void bind_reasoning(SQLite::Statement& q, int index, const std::optional<std::string>& reasoning) {
    if (reasoning) {
        q.bind(index, *reasoning);
    } else {
        q.bind(index);
    }
}

Result<void> Store::update_message(int64_t id, const std::string& content,
                                   const std::optional<std::string>& reasoning) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db,
                            "UPDATE messages SET content = ?, reasoning = COALESCE(?, reasoning), updated_ms = ? "
                            "WHERE id = ?");
        q.bind(1, content);
        bind_reasoning(q, 2, reasoning);
        q.bind(3, now_ms());
        q.bind(4, id);
        return changed_one(q.exec(), "message", id);
    });
}

Result<void> Store::finish_message(int64_t id, const std::string& content, MessageState state,
                                   const MessageStats& stats, const std::string& error,
                                   const std::optional<std::string>& reasoning) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        const int64_t at = now_ms();
        SQLite::Statement q(
            impl_->db,
            "UPDATE messages SET content = ?, state = ?, error = ?, model = ?, "
            "prompt_tokens = ?, generated_tokens = ?, ttft_ms = ?, tokens_per_second = ?, "
            "energy_joules = ?, updated_ms = ?, reused_tokens = ?, engine = ?, "
            "recoveries_json = ?, throttle = ?, reasoning = COALESCE(?, reasoning), drafted_tokens = ?, "
            "accepted_tokens = ? WHERE id = ?");
        q.bind(1, content);
        q.bind(2, message_state_name(state));
        q.bind(3, error);
        q.bind(4, stats.model);
        q.bind(5, stats.prompt_tokens);
        q.bind(6, stats.generated_tokens);
        q.bind(7, stats.ttft_ms);
        q.bind(8, stats.tokens_per_second);
        if (stats.energy_joules) {
            q.bind(9, *stats.energy_joules);
        } else {
            q.bind(9);
        }
        q.bind(10, at);
        q.bind(11, stats.reused_tokens);
        q.bind(12, stats.engine);
        q.bind(13, recoveries_json(stats.recoveries));
        q.bind(14, stats.throttle);
        bind_reasoning(q, 15, reasoning);
        q.bind(16, stats.drafted_tokens);
        q.bind(17, stats.accepted_tokens);
        q.bind(18, id);
        if (Result<void> r = changed_one(q.exec(), "message", id); !r) return r;
        SQLite::Statement touch(impl_->db,
                                "UPDATE conversations SET updated_ms = ? WHERE id = "
                                "(SELECT conversation_id FROM messages WHERE id = ?)");
        touch.bind(1, at);
        touch.bind(2, id);
        touch.exec();
        transaction.commit();
        return {};
    });
}

Result<std::vector<Message>> Store::messages(int64_t conversation_id) const {
    return impl_->guarded([&]() -> Result<std::vector<Message>> {
        SQLite::Statement q(
            impl_->db, fmt::format("SELECT {} FROM messages WHERE conversation_id = ? ORDER BY id", kMessageColumns));
        q.bind(1, conversation_id);
        std::vector<Message> out;
        while (q.executeStep()) out.push_back(read_message(q));
        return out;
    });
}

Result<std::vector<MessageStats>> Store::measured_answers(int limit) const {
    return impl_->guarded([&]() -> Result<std::vector<MessageStats>> {
        SQLite::Statement q(impl_->db,
                            "SELECT generated_tokens, tokens_per_second, energy_joules FROM messages "
                            "WHERE role = 'assistant' AND energy_joules IS NOT NULL AND generated_tokens > 0 "
                            "AND tokens_per_second > 0 ORDER BY updated_ms DESC, id DESC LIMIT ?");
        q.bind(1, limit);
        std::vector<MessageStats> out;
        while (q.executeStep()) {
            MessageStats stats;
            stats.generated_tokens = q.getColumn(0).getInt64();
            stats.tokens_per_second = q.getColumn(1).getDouble();
            stats.energy_joules = q.getColumn(2).getDouble();
            out.push_back(std::move(stats));
        }
        return out;
    });
}

Result<Message> Store::message(int64_t id) const {
    return impl_->guarded([&]() -> Result<Message> {
        SQLite::Statement q(impl_->db, fmt::format("SELECT {} FROM messages WHERE id = ?", kMessageColumns));
        q.bind(1, id);
        if (!q.executeStep()) return make_error(ErrorCode::invalid_argument, fmt::format("no message {}", id));
        return read_message(q);
    });
}

Result<void> Store::delete_message(int64_t id) {
    return impl_->guarded([&]() -> Result<void> {
        SQLite::Statement q(impl_->db, "DELETE FROM messages WHERE id = ?");
        q.bind(1, id);
        return changed_one(q.exec(), "message", id);
    });
}

Result<int> Store::delete_messages_after(int64_t message_id) {
    return impl_->guarded([&]() -> Result<int> {
        SQLite::Statement q(impl_->db,
                            "DELETE FROM messages WHERE conversation_id = "
                            "(SELECT conversation_id FROM messages WHERE id = ?1) AND id > ?1");
        q.bind(1, message_id);
        return q.exec();
    });
}

Result<Message> Store::replace_messages_from(int64_t message_id, const std::string& role, const std::string& content) {
    PH_TRY(check_role(role));
    return impl_->guarded([&]() -> Result<Message> {
        // An exception anywhere leaves the transaction uncommitted: its destructor rolls back.
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement owner(impl_->db, "SELECT conversation_id FROM messages WHERE id = ?");
        owner.bind(1, message_id);
        if (!owner.executeStep())
            return make_error(ErrorCode::invalid_argument, fmt::format("no message {}", message_id));
        const int64_t conversation_id = owner.getColumn(0).getInt64();
        SQLite::Statement gone(impl_->db, "DELETE FROM messages WHERE conversation_id = ? AND id >= ?");
        gone.bind(1, conversation_id);
        gone.bind(2, message_id);
        gone.exec();
        Message m = impl_->insert_message(conversation_id, role, content, MessageState::complete, now_ms());
        transaction.commit();
        return m;
    });
}

Result<std::vector<int64_t>> Store::insert_conversations(const std::vector<ConversationRecord>& records) {
    for (const ConversationRecord& record : records) {
        for (const Message& m : record.messages) {
            if (m.role != "system" && m.role != "user" && m.role != "assistant") {
                return make_error(ErrorCode::invalid_argument,
                                  fmt::format("a message's role is system, user or assistant, not '{}'", m.role));
            }
        }
    }
    return impl_->guarded([&]() -> Result<std::vector<int64_t>> {
        // An exception anywhere leaves the transaction uncommitted: its destructor rolls back.
        SQLite::Transaction transaction(impl_->db, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement conversation(impl_->db,
                                       "INSERT INTO conversations (title, system_prompt, settings_json, "
                                       "created_ms, updated_ms) VALUES (?, ?, ?, ?, ?)");
        SQLite::Statement message(
            impl_->db,
            "INSERT INTO messages (conversation_id, role, content, state, error, model, "
            "prompt_tokens, generated_tokens, ttft_ms, tokens_per_second, energy_joules, "
            "created_ms, updated_ms, reused_tokens, engine, recoveries_json, throttle, reasoning, "
            "drafted_tokens, accepted_tokens, tool_calls) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        std::vector<int64_t> ids;
        ids.reserve(records.size());
        for (const ConversationRecord& record : records) {
            const Conversation& c = record.conversation;
            conversation.reset();
            conversation.bind(1, c.title);
            conversation.bind(2, c.system_prompt);
            conversation.bind(3, c.settings_json.empty() ? std::string("{}") : c.settings_json);
            conversation.bind(4, c.created_ms);
            conversation.bind(5, c.updated_ms);
            conversation.exec();
            const int64_t id = impl_->db.getLastInsertRowid();
            ids.push_back(id);
            for (const Message& m : record.messages) {
                message.reset();
                message.bind(1, id);
                message.bind(2, m.role);
                message.bind(3, m.content);
                message.bind(4, message_state_name(m.state));
                message.bind(5, m.error);
                message.bind(6, m.stats.model);
                message.bind(7, m.stats.prompt_tokens);
                message.bind(8, m.stats.generated_tokens);
                message.bind(9, m.stats.ttft_ms);
                message.bind(10, m.stats.tokens_per_second);
                if (m.stats.energy_joules) {
                    message.bind(11, *m.stats.energy_joules);
                } else {
                    message.bind(11);
                }
                message.bind(12, m.created_ms);
                message.bind(13, m.updated_ms);
                message.bind(14, m.stats.reused_tokens);
                message.bind(15, m.stats.engine);
                message.bind(16, recoveries_json(m.stats.recoveries));
                message.bind(17, m.stats.throttle);
                message.bind(18, m.reasoning);
                message.bind(19, m.stats.drafted_tokens);
                message.bind(20, m.stats.accepted_tokens);
                message.bind(21, m.tool_calls);
                message.exec();
            }
        }
        transaction.commit();
        return ids;
    });
}

}  // namespace powerhouse::store
