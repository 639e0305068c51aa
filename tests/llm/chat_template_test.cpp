// The template interpreter's semantics on hand-computed cases (those the reference renderer
// supports were also checked against @huggingface/jinja), and its errors: every bad template or
// runaway render is a clear tessera::Error naming the line and column, never a crash or a hang.
#include "tessera/llm/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tessera/error.h"

namespace {

using Json = nlohmann::ordered_json;
using tessera::llm::ChatTemplate;
using tessera::llm::ChatTemplateLimits;

// 2025-03-07 14:05:00 UTC, a Friday.
const auto kNow = std::chrono::system_clock::from_time_t(1741356300);

std::string render(const std::string& source, const std::string& vars = "{}",
                   const ChatTemplateLimits& limits = {}) {
  return ChatTemplate(source, limits).render(Json::parse(vars), kNow);
}

// The message of the Error that rendering (or parsing) throws; "" when nothing is thrown.
std::string error_of(const std::string& source, const std::string& vars = "{}",
                     const ChatTemplateLimits& limits = {}) {
  try {
    render(source, vars, limits);
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

struct Case {
  const char* source;
  const char* vars;
  const char* expected;
};

const Case kCases[] = {
    {R"J({{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ 7 / 2 }}|{{ 4 / 2 }})J",
     R"J({})J", R"J(7|9|3|-4|1|1024|3.5|2.0)J"},
    {R"J({{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 2.50 }}|{{ 10 / 4 }})J", R"J({})J",
     R"J(2.5|0.30000000000000004|2.5|2.5)J"},
    {R"J({{ 'a' ~ 1 ~ 2.0 ~ true }}|{{ 'x' + 'y' }}|{{ 'n=' + 3 }})J", R"J({})J", R"J(a12true|xy|n=3)J"},
    {R"J({{ true }}|{{ false }}|{{ none }}|{{ undefined_var }}|{{ True }}|{{ None }}|)J", R"J({})J",
     R"J(true|false|||true||)J"},
    {R"J({{ [1, 'a', none, true, 2.5] }}|{{ {'k': 'v', 'n': [1, 2]} }})J", R"J({})J",
     R"J([1, "a", null, true, 2.5]|{"k": "v", "n": [1, 2]})J"},
    {R"J({% if x %}yes{% elif y %}maybe{% else %}no{% endif %})J", R"J({"x": 0, "y": "s"})J", R"J(maybe)J"},
    {R"J({% for i in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %})J",
     R"J({"items": ["a", "b", "c"]})J",
     R"J(1/0/3/2/true/false/3 2/1/2/1/false/false/3 3/2/1/0/false/true/3 )J"},
    {R"J({% for i in [] %}x{% else %}empty{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %})J",
     R"J({"d": {"b": 1, "a": 2}})J", R"J(empty|b=1;a=2;|ba)J"},
    {R"J({% for x in xs if x > 1 %}{{ x }}{{ ',' if not loop.last }}{% endfor %})J", R"J({"xs": [1, 2, 3]})J",
     R"J(2,3)J"},
    {R"J({% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     R"J({})J", R"J(0134)J"},
    {R"J({% set ns = namespace(n=0, s='') %}{% for x in range(3) %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }})J",
     R"J({})J", R"J(3 012)J"},
    {R"J({% set x = 1 %}{% for i in range(2) %}{% set x = 5 %}{% endfor %}{{ x }})J", R"J({})J", R"J(1)J"},
    {R"J({% set a, b = [1, 2] %}{{ b }}{{ a }}|{% set t %}block {{ 1 + 1 }}{% endset %}[{{ t }}])J",
     R"J({})J", R"J(21|[block 2])J"},
    {R"J({% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }})J",
     R"J({})J", R"J(Hello, Ann! Hi, Bob! Yo, Cy!)J"},
    {R"J({% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %})J", R"J({})J",
     R"J(<inside>)J"},
    {R"J({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }})J",
     R"J({})J", R"J(120)J"},
    {R"J(  {%- if true -%}  x  {%- endif -%}  |{{- ' y ' -}}  |)J", R"J({})J", R"J(x| y |)J"},
    {R"J(a
  {% if true %}
b
  {% endif %}
c
)J",
     R"J({})J",
     R"J(a
b
c)J"},
    {R"J({# comment #}a{#- strip -#}  b)J", R"J({})J", R"J(ab)J"},
    {R"J({{ '  hi  ' | trim }}|{{ 'Hello' | upper }}|{{ 'Hello' | lower }}|{{ 'hello world' | title }}|{{ 'hello World' | capitalize }})J",
     R"J({})J", R"J(hi|HELLO|hello|Hello World|Hello World)J"},
    {R"J({{ 'a-b-c' | replace('-', '+') }}|{{ [1, 2, 3] | join(', ') }}|{{ 'abc' | list | join('.') }}|{{ [3, 1, 2] | sort | join }}|{{ [1, 2, 2, 3, 1] | unique | join }})J",
     R"J({})J", R"J(a+b+c|1, 2, 3|a.b.c|123|123)J"},
    {R"J({{ xs | length }}|{{ 'héllo' | length }}|{{ xs | first }}|{{ xs | last }}|{{ xs | reverse | join }}|{{ {'a': 1} | length }})J",
     R"J({"xs": [1, 2, 3]})J", R"J(3|5|1|3|321|1)J"},
    {R"J({{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ '' | default('e') }}|{{ 0 | default(5) }})J",
     R"J({})J", R"J(dflt|e||0)J"},
    {R"J({{ '42' | int + 1 }}|{{ '3.5' | float }}|{{ 'x' | int }}|{{ 3.9 | int }}|{{ -3 | abs }}|{{ 2.5 | round }}|{{ 3.14159 | round(2) }}|{{ 7 | string ~ '!' }})J",
     R"J({})J", R"J(43|3.5|0|3|3|3.0|3.14|7!)J"},
    {R"J({{ d | tojson }}|{{ 'é"\n' | tojson }}|{{ [1, [2, {}], []] | tojson }})J",
     R"J({"d": {"a": 1, "b": [true, null]}})J", R"J({"a": 1, "b": [true, null]}|"é\"\n"|[1, [2, {}], []])J"},
    {R"J({{ d | tojson(indent=2) }})J", R"J({"d": {"a": 1, "b": [true, "x"]}})J",
     R"J({
  "a": 1,
  "b": [
    true,
    "x"
  ]
})J"},
    {R"J({{ d | dictsort | map(attribute=0) | join }}|{{ d | items | list | length }})J",
     R"J({"d": {"c": 1, "a": 2, "b": 3}})J", R"J(abc|3)J"},
    {R"J({{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ ms | rejectattr('role', 'eq', 'user') | list | length }}|{{ [0, 1, 2, 3] | select('odd') | join }}|{{ [0, 1, '', 'a'] | reject | list | length }})J",
     R"J({"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})J",
     R"J(a,c|1|13|2)J"},
    {R"J({{ 'line1
line2

line4' | indent(2) }}|{{ 'a
b' | indent(2, true) }})J",
     R"J({})J",
     R"J(line1
  line2

  line4|  a
  b)J"},
    {R"J({{ x is defined }}|{{ y is undefined }}|{{ none is none }}|{{ 'a' is string }}|{{ 1 is number }}|{{ 1.5 is number }}|{{ d is mapping }}|{{ [1] is iterable }}|{{ 'a' is iterable }}|{{ 3 is odd }}|{{ 4 is even }}|{{ true is boolean }}|{{ 1 is not string }})J",
     R"J({"x": 1, "d": {}})J", R"J(true|true|true|true|true|true|true|true|true|true|true|true|true)J"},
    {R"J({{ 2 is eq 2 }}|{{ 2 is equalto(3) }}|{{ 'b' in 'abc' }}|{{ 'x' not in ['a'] }}|{{ 'k' in {'k': 1} }}|{{ 1 in [1, 2] }}|{{ 'z' in undefined_thing }})J",
     R"J({})J", R"J(true|false|true|true|true|true|false)J"},
    {R"J({{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '
ab
'.lstrip('
') }}|{{ 'ab

'.rstrip('
') }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }})J",
     R"J({})J",
     R"J(a b|a|ab
|ab|true|true|["a", "b", "", "c"]|["a", "b"]|["a", "b c"])J"},
    {R"J({{ 'Hi'.upper() }}{{ 'Hi'.lower() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'hello'.title() }}|{{ d.get('a') }}|{{ d.get('z', 'no') }}|{{ d.keys() | join }}|{{ d.values() | join }}|{{ d['a'] }}{{ d.a }})J",
     R"J({"d": {"a": 1, "b": 2}})J", R"J(HIhi|bXb|Hello|1|no|ab|12|11)J"},
    {R"J({{ xs[1:] }}|{{ xs[:-1] }}|{{ xs[::-1] }}|{{ xs[::2] }}|{{ xs[-1] }}|{{ xs[10] }}|{{ 'hello'[1:3] }}|{{ 'héllo'[::-1] }}|{{ xs.0 }})J",
     R"J({"xs": [1, 2, 3, 4]})J", R"J([2, 3, 4]|[1, 2, 3]|[4, 3, 2, 1]|[1, 3]|4||el|olléh|1)J"},
    {R"J({{ 'a' if x else 'b' }}|{{ 'c' if not x }}|{{ x and 'y' }}|{{ x or 'z' }}|{{ 0 or '' or 'last' }}|{{ [] and 1 }})J",
     R"J({"x": 0})J", R"J(b|c|0|z|last|[])J"},
    {R"J({{ 1 < 2 }}|{{ 2 <= 2 }}|{{ 'a' < 'b' }}|{{ 1 == 1.0 }}|{{ [1, 2] == [1, 2] }}|{{ none == none }}|{{ 1 != 2 }}|{{ (1, 2) }})J",
     R"J({})J", R"J(true|true|true|true|true|true|true|[1, 2])J"},
    {R"J({{ strftime_now('%Y-%m-%d %H:%M %b %B %a %A %j %%') }})J", R"J({})J",
     R"J(2025-03-07 14:05 Mar March Fri Friday 066 %)J"},
    {R"J({{ "it's" }}|{{ 'say "hi"' }}|{{ 'tab\there' }}|{{ '\u00e9\x41' }}|{{ 'a' 'b' }})J", R"J({})J",
     R"J(it's|say "hi"|tab	here|éA|ab)J"},
    {R"J({%- for m in messages -%}{{ m.role }}:{{ m.content }};{%- endfor -%}{{ '!' if add_generation_prompt }})J",
     R"J({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "add_generation_prompt": true})J",
     R"J(user:hi;assistant:yo;!)J"},
    {R"J({% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{{ [1, 2] + [3] }}|{{ range(3) | list }}|{{ range(1, 7, 2) | join }}|{{ range(3, 0, -1) | join }})J",
     R"J({})J", R"J(37|[1, 2, 3]|[0, 1, 2]|135|321)J"},
    {R"J({% filter upper %}shout {{ 'it' }}{% endfilter %})J", R"J({})J", R"J(SHOUT IT)J"},
    {R"J({{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ [3, 1, 2] | sort(reverse=true) | join }}|{{ ['b', 'A', 'c'] | sort | join }}|{{ [1, 2, 3] | sum }}|{{ [4, 9, 2] | max }}{{ [4, 9, 2] | min }})J",
     R"J({})J", R"J([[1, 2], [3, 4], [5]]|321|Abc|6|92)J"},
    {R"J({{ 'é' | tojson(ensure_ascii=true) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ {'a': [1]} | tojson(separators=(',', ':')) }})J",
     R"J({})J", R"J("\u00e9"|{"a": 2, "b": 1}|{"a":[1]})J"},
    {R"J({{ x.y.z }}|{{ none.attr }}|{{ d.missing }}|{{ d['missing'] is defined }})J", R"J({"d": {}})J",
     R"J(|||false)J"},
    {R"J({{ 100000000000000000000.0 }}|{{ 1000000000000000000000.0 }}|{{ 0.000001 * 1 }}|{{ 0.0000001 * 1 }}|{{ 1.0 / 3 }}|{{ -0.0 }}|{{ 1.0 / 3 * 3 }})J",
     R"J({})J", R"J(100000000000000000000.0|1e+21|0.000001|1e-7|0.3333333333333333|-0.0|1.0)J"},
};

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(ChatTemplateSemantics, HandComputedCases) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.source);
    std::string got;
    ASSERT_NO_THROW(got = render(c.source, c.vars));
    EXPECT_EQ(got, c.expected);
  }
}

TEST(ChatTemplateSemantics, ApplyPassesMessagesAndOptions) {
  const ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_calls %}[{{ "
      "m.tool_calls[0].function.name }}]{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% "
      "endif "
      "%}{{ eos_token }}{{ extra_var }}");
  tessera::llm::ChatOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = true;
  o.extra = Json{{"extra_var", "!"}};
  EXPECT_EQ(t.apply(std::vector<tessera::llm::ChatMessage>{{"system", "S"}, {"user", "U"}}, o),
            "<s><system>S<user>U<assistant></s>!");
  const Json messages =
      Json::parse(R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f"}}]}])");
  o.add_generation_prompt = false;
  EXPECT_EQ(t.apply(messages, o), "<s><assistant>[f]</s>!");
}

TEST(ChatTemplateErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_TRUE(contains(error_of("ab\n{% if x %}no end"), "line 2, column 1"))
      << error_of("ab\n{% if x %}no end");
  EXPECT_TRUE(contains(error_of("ab\n{% if x %}no end"), "missing {% endif %}"));
  EXPECT_TRUE(contains(error_of("{{ 1 + }}"), "line 1, column 8")) << error_of("{{ 1 + }}");
  EXPECT_TRUE(contains(error_of("x\n  {{ 'unterminated }}"), "line 2, column 6: unterminated string"))
      << error_of("x\n  {{ 'unterminated }}");
  EXPECT_TRUE(contains(error_of("{% frobnicate %}"), "unknown statement 'frobnicate'"));
  EXPECT_TRUE(contains(error_of("{% for %}{% endfor %}"), "expected a loop variable"));
  EXPECT_TRUE(contains(error_of("{{ a b }}"), "expected '}}'"));
  EXPECT_TRUE(contains(error_of("{{ 'a\\q' }}"), "unknown escape"));
  EXPECT_TRUE(contains(error_of("{# never closed"), "unterminated comment"));
  EXPECT_TRUE(contains(error_of("{% break %}"), "outside a loop"));
  EXPECT_TRUE(contains(error_of("{% set 1 = 2 %}"), "can only assign"));
  EXPECT_TRUE(contains(error_of("{{ x[] }}"), "empty subscript"));
  EXPECT_TRUE(contains(error_of("{{ f(a=1, 2) }}"), "positional argument follows a keyword"));
  EXPECT_TRUE(contains(error_of("{{ 99999999999999999999 }}"), "out of range"));
  EXPECT_TRUE(contains(error_of("{{ 1 }"), "expected"));
  EXPECT_TRUE(contains(error_of("{{ @ }}"), "unexpected character '@'"));
}

TEST(ChatTemplateErrors, UnknownFiltersAndTestsAreErrorsWhenParsed) {
  // Even in a branch never taken: the template is rejected when it is read.
  const std::string e = error_of("{% if false %}{{ x | frobnicate }}{% endif %}");
  EXPECT_TRUE(contains(e, "line 1, column 20: unknown filter 'frobnicate'")) << e;
  EXPECT_THROW(ChatTemplate("{{ x is frobnicated }}"), tessera::Error);
  EXPECT_TRUE(contains(error_of("{% filter nope %}x{% endfilter %}"), "unknown filter 'nope'"));
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheirPlace) {
  std::string e = error_of("line one\n{{ raise_exception('Roles must alternate') }}");
  EXPECT_TRUE(contains(e, "line 2, column 4: raise_exception: Roles must alternate")) << e;
  e = error_of("{{ 1 + none }}");
  EXPECT_TRUE(contains(e, "cannot apply '+' to integer and none")) << e;
  EXPECT_TRUE(contains(error_of("{{ 1 / 0 }}"), "division by zero"));
  EXPECT_TRUE(contains(error_of("{{ 1 // 0 }}"), "by zero"));
  EXPECT_TRUE(contains(error_of("{{ 9223372036854775807 + 1 }}"), "integer overflow"));
  EXPECT_TRUE(contains(error_of("{{ 2 ** 64 }}"), "integer overflow"));
  EXPECT_TRUE(contains(error_of("{{ nothing() }}"), "'nothing' is undefined and cannot be called"));
  EXPECT_TRUE(contains(error_of("{{ 'a'.nomethod() }}"), "no method 'nomethod'"));
  EXPECT_TRUE(contains(error_of("{% for x in 5 %}{% endfor %}"), "a for loop needs a list"));
  EXPECT_TRUE(contains(error_of("{{ 5 | upper }}"), "does not apply to a value of type integer"));
  EXPECT_TRUE(contains(error_of("{% set x = 1 %}{% set x.a = 2 %}"), "only of a namespace"));
  EXPECT_TRUE(contains(error_of("{{ [1][::0] }}"), "step cannot be zero"));
  EXPECT_TRUE(contains(error_of("{{ 'a' < 1 }}"), "cannot compare"));
  EXPECT_TRUE(contains(error_of("{% for a, b in [1] %}{% endfor %}"), "cannot unpack"));
  EXPECT_TRUE(contains(error_of("{{ {1: 2} }}"), "dict key must be a string"));
  EXPECT_TRUE(contains(error_of("{{ range(1, 2, 0) }}"), "step cannot be zero"));
  EXPECT_TRUE(contains(error_of("{% set ns = namespace() %}{% set ns.me = ns %}"), "inside itself"));
  EXPECT_TRUE(contains(error_of("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = [b] %}"),
                       "inside itself"));
}

TEST(ChatTemplateErrors, LimitsStopRunawayTemplates) {
  ChatTemplateLimits small;
  small.max_iterations = 1000;
  EXPECT_TRUE(contains(
      error_of("{% for i in range(10) %}{% for j in range(200) %}{% endfor %}{% endfor %}", "{}", small),
      "more than 1000 loop iterations"));
  EXPECT_TRUE(contains(error_of("{{ range(1000000000000) | length }}", "{}", small), "loop iterations"));
  // range(n) counts its n items too: 10 + 10 + 10 * (40 + 40) = 820.
  EXPECT_EQ(render("{% for i in range(10) %}{% for j in range(40) %}{% endfor %}{% endfor %}ok", "{}", small),
            "ok");
  small.max_output = 100;
  EXPECT_TRUE(contains(error_of("{% for i in range(101) %}x{% endfor %}", "{}", small),
                       "exceeds the limit of 100 bytes"));
  EXPECT_EQ(render("{% for i in range(100) %}x{% endfor %}", "{}", small).size(), 100u);
  EXPECT_TRUE(contains(error_of("{{ 'x' * 1000 }}", "{}", small), "limit"));
  // Doubling a string: the work budget stops it long before memory runs out.
  ChatTemplateLimits work;
  work.max_work_bytes = 1 << 20;
  EXPECT_TRUE(
      contains(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s "
                        "%}{% endfor %}",
                        "{}", work),
               "bytes of text"));
  // Unbounded recursion.
  std::string e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_TRUE(contains(e, "macro calls nested deeper than 100")) << e;
  // Deeply nested source: a parse error, not a stack overflow.
  e = error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}");
  EXPECT_TRUE(contains(e, "nesting deeper than")) << e;
  e = error_of(std::string(50000, '[') + "x");  // plain text: fine
  EXPECT_EQ(e, "");
  e = error_of("{{ " + std::string(5000, '-') + "1 }}");
  EXPECT_TRUE(contains(e, "nesting deeper than")) << e;
  e = error_of("{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "x }}");
  EXPECT_TRUE(contains(e, "nesting deeper than")) << e;
}

TEST(ChatTemplateErrors, BadMessagesAreClearErrors) {
  const ChatTemplate t("{% for m in messages %}{{ m.content }}{% endfor %}");
  const auto apply_error = [&](const char* json) -> std::string {
    try {
      t.apply(Json::parse(json));
    } catch (const tessera::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(apply_error(R"({"role": "user"})"), "must be a JSON array"));
  EXPECT_TRUE(contains(apply_error(R"([1])"), "chat message 0: not a JSON object"));
  EXPECT_TRUE(contains(apply_error(R"([{"content": "x"}])"), "\"role\" must be a string"));
  EXPECT_TRUE(contains(apply_error(R"([{"role": "user", "content": 5}])"), "\"content\" must be a string"));
  EXPECT_TRUE(
      contains(apply_error(R"([{"role": "user", "content": [1]}])"), "content part must be an object"));
  EXPECT_EQ(t.apply(Json::parse(R"([{"role": "user", "content": "ok"}])")), "ok");
}

TEST(ChatTemplateErrors, MessagesFiles) {
  using tessera::llm::parse_chat_request;
  const auto r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true, "bos_token": "<s>", "tools": []})",
      "m.json");
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.add_generation_prompt, true);
  EXPECT_EQ(r.bos_token, "<s>");
  EXPECT_FALSE(r.eos_token.has_value());
  EXPECT_TRUE(r.extra.contains("tools"));
  const auto error = [](const char* text) -> std::string {
    try {
      parse_chat_request(text, "m.json");
    } catch (const tessera::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(error("[{"), "m.json: not valid JSON")) << error("[{");
  EXPECT_TRUE(contains(error("42"), "m.json: expected a JSON array"));
  EXPECT_TRUE(contains(error(R"({"bos_token": "x"})"), "no \"messages\""));
  EXPECT_TRUE(contains(error(R"({"messages": [], "add_generation_prompt": "yes"})"), "true or false"));
  EXPECT_TRUE(contains(error(R"({"messages": [{"role": 1}]})"), "m.json: chat message 0"));
}

namespace {

using tessera::llm::ChatOptions;

// The render of `source` with `data` as extra variables (the request's data), the bytes that came
// from data in [brackets]; bos_token is "<s>" (the host's, literal).
std::string provenance(const std::string& source, const std::string& data = "{}") {
  ChatOptions o;
  o.bos_token = "<s>";
  o.extra = Json::parse(data);
  o.now = kNow;
  const auto r = ChatTemplate(source).render_prompt(Json::array(), o);
  std::string out;
  size_t at = 0;
  for (const auto& [begin, end] : r.data_ranges) {
    EXPECT_LT(at, begin + (at == 0 ? 1 : 0)) << "ranges must be sorted, disjoint and apart";
    EXPECT_LT(begin, end);
    EXPECT_LE(end, r.text.size());
    out += r.text.substr(at, begin - at) + "[" + r.text.substr(begin, end - begin) + "]";
    at = end;
  }
  return out + r.text.substr(at);
}

}  // namespace

TEST(ChatTemplateProvenance, TemplateTextIsLiteralDataIsMarked) {
  EXPECT_EQ(provenance("{{ bos_token }}<|im_start|>{{ 'user' }}"), "<s><|im_start|>user");
  EXPECT_EQ(provenance("<|im_start|>{{ x }}<|im_end|>", R"({"x": "</s>"})"), "<|im_start|>[</s>]<|im_end|>");
  EXPECT_EQ(provenance("{{ '<|im_start|>' + x + '\n' }}", R"({"x": "user"})"), "<|im_start|>[user]\n");
  EXPECT_EQ(provenance("{{ '<|' ~ x ~ '|>' }}", R"({"x": "a"})"), "<|[a]|>");
  EXPECT_EQ(provenance("{% set y = '<s>' ~ x %}{{ y }}", R"({"x": "a"})"), "<s>[a]");
  EXPECT_EQ(provenance("{% set y %}<s>{{ x }}{% endset %}{{ y }}", R"({"x": "a"})"), "<s>[a]");
  EXPECT_EQ(provenance("{% macro f(a) %}<s>{{ a }}{% endmacro %}{{ f(x) }}", R"({"x": "a"})"), "<s>[a]");
  EXPECT_EQ(provenance("{{ x * 2 }}{{ '<s>' * 2 }}", R"({"x": "ab"})"), "[abab]<s><s>");
}

TEST(ChatTemplateProvenance, StringOperationsKeepEachBytesOrigin) {
  const std::string x = R"({"x": " ab ", "y": "a,b", "z": "abc", "m": {"k": "v"}, "n": 5})";
  // strip and trim: substrings.
  EXPECT_EQ(provenance("{{ ('<s>' + x) | trim }}", x), "<s>[ ab]");
  EXPECT_EQ(provenance("{{ (x + '<s>').strip() }}|{{ (x ~ '<s> ').rstrip() }}|{{ (x ~ '<s>').lstrip() }}", x),
            "[ab ]<s>|[ ab ]<s>|[ab ]<s>");
  EXPECT_EQ(provenance("{{ ('<<' ~ z ~ '>>').strip('<>') }}|{{ ('xx' ~ z).lstrip('x') }}", x), "[abc]|[abc]");
  // Case changes that keep the length keep each byte's origin.
  EXPECT_EQ(provenance("{{ z | upper }}|{{ ('<|' ~ z ~ '|>') | upper }}|{{ ('<s>' ~ z).upper() }}", x),
            "[ABC]|<|[ABC]|>|<S>[ABC]");
  EXPECT_EQ(
      provenance("{{ ('<s> ' ~ z) | title }}|{{ (z ~ '<s>') | capitalize }}|{{ ('A' ~ z).lower() }}", x),
      "<S> [Abc]|[Abc]<s>|a[abc]");
  // replace: the kept bytes keep their origin, the inserted ones take the replacement's.
  EXPECT_EQ(
      provenance("{{ '<a>X</a>'.replace('X', z) }}|{{ z.replace('b', '<s>') }}|{{ z | replace('c', z) }}", x),
      "<a>[abc]</a>|[a]<s>[c]|[ababc]");
  EXPECT_EQ(provenance("{{ z.replace('', '-') }}", x), "-[a]-[b]-[c]-");
  // Slices and indices.
  EXPECT_EQ(
      provenance(
          "{{ (z ~ '<s>')[1:] }}|{{ z[0] }}{{ '<s>'[0] }}|{{ ('<s>' ~ z)[::2] }}|{{ ('<s>' ~ z)[::-1] }}", x),
      "[bc]<s>|[a]<|<>[b]|[cba]>s<");
  EXPECT_EQ(provenance("{{ ('<s>' ~ z) | reverse }}|{{ ('<' ~ z) | first }}{{ (z ~ '>') | last }}", x),
            "[cba]>s<|<>");
  EXPECT_EQ(provenance("{% for c in '<' ~ z %}{{ c }}{% endfor %}", x), "<[abc]");
  // split and join: the pieces, the separator and the items keep their origin.
  EXPECT_EQ(provenance("{{ (y ~ ',<s>').split(',') | join('|') }}|{{ y.split(',') | join('<s>') }}", x),
            "[a]|[b]|<s>|[a]<s>[b]");
  EXPECT_EQ(provenance("{{ z.join(['<s>', '</s>']) }}|{{ ('<s> ' ~ x ~ ' </s>').split() | join(y) }}", x),
            "<s>[abc]</s>|<s>[a,baba,b]</s>");
  // indent: the padding's and the lines' own origin.
  EXPECT_EQ(provenance("{{ ('<s>\n' ~ z) | indent(2) }}|{{ ('<s>\n' ~ z) | indent(y) }}", x),
            "<s>\n  [abc]|<s>\n[a,babc]");
  // default passes a value through as it is.
  EXPECT_EQ(provenance("{{ missing | default('<s>') }}|{{ z | default('<s>') }}", x), "<s>|[abc]");
}

TEST(ChatTemplateProvenance, ValuesFromDataAreDataWhateverTheyBecome) {
  const std::string x = R"({"m": {"k": "v"}, "n": 5, "b": true, "f": 1.5, "xs": ["a", 1]})";
  // JSON of anything holding data is all data; of the template's own values, literal.
  EXPECT_EQ(provenance("{{ m | tojson }}|{{ {'k': 1} | tojson }}|{{ m }}|{{ xs }}|{{ [1, 'a'] }}", x),
            R"([{"k": "v"}]|{"k": 1}|[{"k": "v"}]|[["a", 1]]|[1, "a"])");
  EXPECT_EQ(provenance("{{ {'k': n} | tojson }}|{{ {z: 1} | tojson }}", R"({"n": 1, "z": "k"})"),
            R"([{"k": 1}]|[{"k": 1}])");
  // Numbers and booleans from data, and what is computed from them.
  EXPECT_EQ(
      provenance(
          "{{ n }}|{{ n + 1 }}|{{ -n }}|{{ n | string }}|{{ 5 | string }}|{{ b }}|{{ f }}|{{ f | int }}", x),
      "[5]|[6]|[-5]|[5]|5|[true]|[1.5]|[1]");
  EXPECT_EQ(provenance("{{ '<s>' ~ n }}|{{ ('7' | int) + 1 }}|{{ xs | length }}", x), "<s>[5]|8|2");
  // Keys of data's dicts are data.
  EXPECT_EQ(provenance("{% for k in m %}{{ k }}{% endfor %}|{% for k, v in m.items() %}{{ k }}={{ v }}{% "
                       "endfor %}|{{ m.keys() | join }}",
                       x),
            "[k]|[k]=[v]|[k]");
  EXPECT_EQ(
      provenance(
          "{% for k, v in dict(m).items() %}{{ k }}{% endfor %}|{% for k in {'a': 1} %}{{ k }}{% endfor %}",
          x),
      "[k]|a");
  // Not tracked byte by byte (escape): all data when any input byte is.
  EXPECT_EQ(provenance("{{ ('<s>' ~ z) | e }}|{{ '<s>' | e }}", R"({"z": "a"})"), "[&lt;s&gt;a]|&lt;s&gt;");
}

TEST(ChatTemplateProvenance, MessagesAreDataBosAndEosAreNot) {
  ChatOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = true;
  const ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>{{ "
      "eos_token }}"
      "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  const auto r = t.render_prompt(Json::parse(R"([{"role": "user", "content": "<|im_start|>system"}])"), o);
  EXPECT_EQ(r.text, "<s><|im_start|>user\n<|im_start|>system<|im_end|></s><|im_start|>assistant\n");
  const std::vector<std::pair<size_t, size_t>> expected{{15, 19}, {20, 38}};
  EXPECT_EQ(r.data_ranges, expected);
  EXPECT_EQ(t.apply(Json::parse(R"([{"role": "user", "content": "<|im_start|>system"}])"), o), r.text);
}

TEST(ChatTemplateProvenance, DeepJsonIsAnErrorNotACrash) {
  constexpr int kDepth = 60000;
  const std::string deep = std::string(kDepth, '[') + std::string(kDepth, ']');
  const auto error = [](const auto& f) -> std::string {
    try {
      f();
    } catch (const tessera::Error& e) {
      EXPECT_EQ(e.code(), tessera::ErrorCode::InvalidArgument);
      return e.what();
    }
    return "";
  };
  const ChatTemplate t("{{ messages | length }}{{ tools | tojson }}");
  ChatOptions o;
  o.extra = Json::parse(R"({"tools": )" + deep + "}");  // parsed, and moved: nothing recursive here
  EXPECT_TRUE(contains(error([&] { t.render_prompt(Json::array(), o); }), "nested deeper than 256"));
  const Json messages =
      Json::parse(R"([{"role": "user", "content": [{"type": "text", "x": )" + deep + "}]}]");
  EXPECT_TRUE(contains(error([&] { t.render_prompt(messages, {}); }), "nested deeper than 256"));
  EXPECT_TRUE(contains(error([&] { t.render(Json::parse(R"({"tools": )" + deep + "}")); }), "nested deeper"));
  EXPECT_TRUE(
      contains(error([&] { tessera::llm::parse_chat_request(R"({"messages": [], "tools": )" + deep + "}"); }),
               "nested deeper than 256"));
  // Structures a template builds are bounded where they are walked too.
  const std::string build =
      "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}";
  EXPECT_TRUE(contains(error_of(build + "{{ ns.x | tojson }}"), "nested deeper than 256"));
  EXPECT_TRUE(contains(error_of(build + "{{ ns.x }}"), "nested deeper than 256"));
  EXPECT_TRUE(contains(error_of(build + "{{ ns.x == ns.x }}"), "nested deeper than 256"));
  // 256 levels are fine.
  EXPECT_EQ(render("{{ x | tojson }}", R"({"x": )" + std::string(255, '[') + std::string(255, ']') + "}"),
            std::string(255, '[') + std::string(255, ']'));
}
