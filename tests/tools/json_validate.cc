// Reads one JSON document on stdin; exits 0 when it is well formed (RFC 8259
// grammar, no extensions), 1 with the byte offset of the first error.
// The functional tests use it so they do not depend on python3.
#include <cctype>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

namespace {

class Parser {
 public:
  explicit Parser(const std::string &s) : s_(s) {}
  bool Document() {
    Ws();
    if (!Value(0)) return false;
    Ws();
    return pos_ == s_.size();
  }
  size_t pos() const { return pos_; }

 private:
  void Ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) pos_++;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  bool Literal(const char *w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (pos_ >= s_.size()) return false;
        char e = s_[pos_++];
        if (e == 'u') {
          for (int i = 0; i < 4; i++)
            if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_++]))) return false;
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool Digits() {
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) pos_++;
    return pos_ > start;
  }
  bool Number() {
    Eat('-');
    if (!Eat('0') && !Digits()) return false;
    if (Eat('.') && !Digits()) return false;
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return false;
    }
    return true;
  }
  bool Value(int depth) {
    if (depth > 64 || pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '{') {
      pos_++;
      Ws();
      if (Eat('}')) return true;
      do {
        Ws();
        if (!String()) return false;
        Ws();
        if (!Eat(':')) return false;
        Ws();
        if (!Value(depth + 1)) return false;
        Ws();
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      pos_++;
      Ws();
      if (Eat(']')) return true;
      do {
        Ws();
        if (!Value(depth + 1)) return false;
        Ws();
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') return String();
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    return Number();
  }
  const std::string &s_;
  size_t pos_ = 0;
};

}  // namespace

int main() {
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  Parser p(text);
  if (p.Document()) return 0;
  std::fprintf(stderr, "json_validate: malformed JSON near byte %zu of %zu\n", p.pos(), text.size());
  return 1;
}
