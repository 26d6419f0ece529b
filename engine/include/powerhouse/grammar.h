// Constrained sampling: a context-free grammar that the generated text must follow, so that
// an answer always parses (JSON mode, a JSON schema, a tool call's format).
//
// Grammars are written in a small BNF (the GBNF notation llama.cpp popularised, so grammars
// people already have work):
//   root   ::= "{" ws pair ("," ws pair)* "}"      # rules: name ::= alternatives
//   pair   ::= string ":" ws value                 # sequences, | alternatives, ( groups )
//   string ::= "\"" [^"\\]* "\""                   # literals with \n \t \" \\ \xHH \uHHHH escapes,
//   digit  ::= [0-9]  ws ::= [ \t\n]{0,4}          # character classes [a-z] [^...], . any char,
//                                                  # repetition * + ? {m} {m,} {m,n}, # comments
// Characters are Unicode code points; the text is matched as UTF-8.
//
// json_schema_to_grammar() turns a JSON schema into such a grammar: types (object, array,
// string, number, integer, boolean, null, and lists of types), properties with required
// ones, additionalProperties (false unless the schema says otherwise), items, prefixItems,
// minItems/maxItems, enum, const, anyOf/oneOf, allOf of objects, $ref to $defs/definitions,
// string minLength/maxLength and the formats date, time, date-time and uuid; integer
// minimum/maximum. What it cannot express is refused with an error naming the keyword, never
// silently ignored. Where the grammar is narrower than JSON Schema: properties come in the
// order of "properties" (optional ones may be left out), numbers have at most 19 integer and
// 20 fraction digits, whitespace between tokens is bounded, oneOf is read as anyOf, and
// {"type": "object"} with neither properties nor additionalProperties means any object.
//
// A GrammarMatcher follows one generation: mask() sets the logits of tokens that cannot
// continue the text to -inf (end-of-generation tokens are allowed only where the grammar
// may end, and are the only ones allowed once it must end); accept() advances over the
// chosen token.
//
// Thread-safety: Grammar and GrammarVocabulary are immutable and shared; a GrammarMatcher is
// per sequence, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "powerhouse/result.h"
#include "powerhouse/tokenizer.h"

namespace powerhouse {

struct GrammarImpl;  // internal: the compiled rules

class Grammar {
public:
    // Parses grammar text; `root` names the start rule. Errors say "LINE:COLUMN: what is
    // wrong" (an undefined rule, an unclosed group, left recursion, ...).
    static Result<Grammar> parse(std::string_view text, std::string_view root = "root");

    const GrammarImpl& impl() const { return *impl_; }
    explicit Grammar(std::shared_ptr<const GrammarImpl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<const GrammarImpl> impl_;
};

// Grammar text for the values that a JSON schema accepts, its start rule named `root` and
// every other rule prefixed with `prefix` (so that the text can be pasted into a larger
// grammar). Whitespace between tokens is allowed but bounded.
Result<std::string> json_schema_to_grammar(const nlohmann::ordered_json& schema, std::string_view root = "root",
                                           std::string_view prefix = "");
// `text` as a literal of the grammar notation (quotes, backslashes and control characters escaped).
std::string grammar_literal(std::string_view text);
// Grammar text for any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_grammar(std::string_view root = "root", std::string_view prefix = "");

struct GrammarVocabularyImpl;  // internal: token bytes in a trie

// What each token of a vocabulary spells, prepared once per model for every matcher.
class GrammarVocabulary {
public:
    static std::shared_ptr<const GrammarVocabulary> build(const Tokenizer& tokenizer);
    const GrammarVocabularyImpl& impl() const { return *impl_; }
    explicit GrammarVocabulary(std::shared_ptr<const GrammarVocabularyImpl> impl) : impl_(std::move(impl)) {}

private:
    std::shared_ptr<const GrammarVocabularyImpl> impl_;
};

class GrammarMatcher {
public:
    GrammarMatcher(Grammar grammar, std::shared_ptr<const GrammarVocabulary> vocabulary);
    ~GrammarMatcher();
    GrammarMatcher(GrammarMatcher&&) noexcept;
    GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

    // logits[id] = -inf for every token that cannot come next (n_vocab floats).
    void mask(std::span<float> logits) const;
    // Advances over `id`. False (and no change) when the token cannot come next.
    bool accept(TokenId id);
    // Advances over text (tests, and text forced into the answer). False: it does not fit.
    bool accept_text(std::string_view text);
    // The text so far is a whole sentence of the grammar (an end-of-generation token may come).
    bool can_end() const;
    // Nothing may follow: only an end-of-generation token.
    bool must_end() const;

    struct State;

private:
    std::unique_ptr<State> state_;
};

}  // namespace powerhouse
