#pragma once
// JSON Schema -> GBNF (tessera/llm/grammar.h) for constrained generation. What the grammar lets a
// model write is always valid against the schema; whatever cannot be enforced is an Error, never
// ignored.
//
// Supported: `type` (object, array, string, number, integer, boolean, null, and arrays of them),
// `properties` and `required` (properties come in the schema's order; optional ones may be left
// out), `additionalProperties` (false, true or a schema; absent: false when `properties` is given,
// else any members; extra keys are written without escapes and never repeat a known property's
// name), `enum`, `const`, `items`, `prefixItems`, `minItems`, `maxItems` (up to 1000),
// `anyOf`, `oneOf` when no two branches can accept one value (their types differ, their
// const/enum values differ, or a required property's const/enum values differ: else refused),
// `allOf` where it merges object schemas without conflicts, `$ref` to `#`, `#/$defs/...`,
// `#/definitions/...` (recursion allowed), `minLength`/`maxLength` (up to 1000 characters),
// `pattern` (a regular subset of ECMAScript regexes: literals, classes, `.`, groups,
// alternatives, quantifiers; unanchored ends match any text), `format` date, time, date-time and
// uuid, `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` for integers and for numbers
// (numbers then come without exponent), `uniqueItems: false`; annotations (title, description,
// default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
// Numbers have at most 16 integer digits, 16 fraction digits and 2 exponent digits. Between tokens the
// grammar allows a bounded run of whitespace (one space, or a newline and up to 20 spaces or tabs), so a
// model cannot write spaces forever.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::llm {

// GBNF for values the schema accepts. Error(InvalidArgument) naming the keyword and its path
// (e.g. "/properties/age/multipleOf") for anything it cannot enforce.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// The same from JSON text (keeps the properties' order); Error(InvalidArgument) when not JSON.
std::string json_schema_to_gbnf(std::string_view schema_text);
// GBNF for any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace tessera::llm
