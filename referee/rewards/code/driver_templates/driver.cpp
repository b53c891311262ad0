// referee's function_tests driver (C++), placed after the program. Every name here starts with
// referee_ or Referee, and `int` is never written, so a program's macros (#define int long
// long, #define x first) cannot reach it. Its placeholders are filled in.
namespace referee_driver {
template <class RefereeF> struct referee_fn;
template <class RefereeR, class... RefereeA>
struct referee_fn<RefereeR (*)(RefereeA...)> {
  using referee_params = std::tuple<RefereeA...>;
};
template <class RefereeR, class... RefereeA>
struct referee_fn<RefereeR (*)(RefereeA...) noexcept> {
  using referee_params = std::tuple<RefereeA...>;
};
#define REFEREE_MEMBER(REFEREE_QUALIFIERS)                                      \
  template <class RefereeC, class RefereeR, class... RefereeA>                   \
  struct referee_fn<RefereeR (RefereeC::*)(RefereeA...) REFEREE_QUALIFIERS> {    \
    using referee_params = std::tuple<RefereeA...>;                              \
  };
REFEREE_MEMBER()
REFEREE_MEMBER(const)
REFEREE_MEMBER(noexcept)
REFEREE_MEMBER(const noexcept)
REFEREE_MEMBER(&)
REFEREE_MEMBER(const &)
#undef REFEREE_MEMBER

template <class RefereeT>
constexpr bool referee_number =
    std::is_integral_v<RefereeT> && !std::is_same_v<RefereeT, bool> &&
    !std::is_same_v<RefereeT, char>;
using referee_text = std::string;

// Every overload is declared before any is defined: the templates find each other.
inline void referee_emit(referee_text& referee_o, bool referee_v);
inline void referee_emit(referee_text& referee_o, char referee_v);
inline void referee_emit(referee_text& referee_o, const referee_text& referee_v);
inline void referee_emit(referee_text& referee_o, const char* referee_v);
inline void referee_emit(referee_text& referee_o, std::nullptr_t);
template <class RefereeT, std::enable_if_t<referee_number<RefereeT>, bool> = true>
void referee_emit(referee_text& referee_o, RefereeT referee_v);
template <class RefereeT, std::enable_if_t<std::is_floating_point_v<RefereeT>, bool> = true>
void referee_emit(referee_text& referee_o, RefereeT referee_v);
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::vector<RefereeT, RefereeA>& referee_v);
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::deque<RefereeT, RefereeA>& referee_v);
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::list<RefereeT, RefereeA>& referee_v);
template <class RefereeT, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::set<RefereeT, RefereeC, RefereeA>& referee_v);
template <class RefereeT, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::multiset<RefereeT, RefereeC, RefereeA>& referee_v);
template <class RefereeT, class RefereeH, class RefereeE, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::unordered_set<RefereeT, RefereeH, RefereeE, RefereeA>& referee_v);
template <class RefereeT, std::size_t RefereeN>
void referee_emit(referee_text& referee_o, const std::array<RefereeT, RefereeN>& referee_v);
template <class RefereeK, class RefereeV, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::map<RefereeK, RefereeV, RefereeC, RefereeA>& referee_v);
template <class RefereeK, class RefereeV, class RefereeH, class RefereeE, class RefereeA>
void referee_emit(
    referee_text& referee_o,
    const std::unordered_map<RefereeK, RefereeV, RefereeH, RefereeE, RefereeA>& referee_v);
template <class RefereeA, class RefereeB>
void referee_emit(referee_text& referee_o, const std::pair<RefereeA, RefereeB>& referee_v);
template <class... RefereeT>
void referee_emit(referee_text& referee_o, const std::tuple<RefereeT...>& referee_v);
template <class RefereeT>
void referee_emit(referee_text& referee_o, const std::optional<RefereeT>& referee_v);

inline void referee_emit(referee_text& referee_o, bool referee_v) {
  referee_o += referee_v ? "true" : "false";
}
inline void referee_emit(referee_text& referee_o, char referee_v) {
  referee_emit(referee_o, referee_text(1, referee_v));
}
inline void referee_emit(referee_text& referee_o, const referee_text& referee_v) {
  referee_o += '"';
  for (unsigned char referee_c : referee_v) {
    if (referee_c == '"' || referee_c == '\\') {
      referee_o += '\\';
      referee_o += static_cast<char>(referee_c);
    } else if (referee_c < 0x20) {
      char referee_b[8];
      std::snprintf(referee_b, sizeof referee_b, "\\u%04x", static_cast<unsigned>(referee_c));
      referee_o += referee_b;
    } else {
      referee_o += static_cast<char>(referee_c);
    }
  }
  referee_o += '"';
}
inline void referee_emit(referee_text& referee_o, const char* referee_v) {
  referee_emit(referee_o, referee_text(referee_v));
}
inline void referee_emit(referee_text& referee_o, std::nullptr_t) { referee_o += "null"; }
template <class RefereeT, std::enable_if_t<referee_number<RefereeT>, bool>>
void referee_emit(referee_text& referee_o, RefereeT referee_v) {
  referee_o += std::to_string(referee_v);
}
template <class RefereeT, std::enable_if_t<std::is_floating_point_v<RefereeT>, bool>>
void referee_emit(referee_text& referee_o, RefereeT referee_v) {
  if (std::isnan(referee_v)) {
    referee_o += "NaN";
  } else if (std::isinf(referee_v)) {
    referee_o += referee_v > 0 ? "Infinity" : "-Infinity";
  } else {  // the shortest text that reads back as the same number
    char referee_b[128];
    auto referee_done = std::to_chars(referee_b, referee_b + sizeof referee_b, referee_v);
    referee_o.append(referee_b, referee_done.ptr);
  }
}
template <class RefereeR>
void referee_items(referee_text& referee_o, const RefereeR& referee_range) {
  referee_o += '[';
  bool referee_first = true;
  for (const auto& referee_item : referee_range) {
    if (!referee_first) referee_o += ',';
    referee_first = false;
    referee_emit(referee_o, referee_item);
  }
  referee_o += ']';
}
template <class RefereeM>
void referee_object(referee_text& referee_o, const RefereeM& referee_m) {
  referee_o += '{';
  bool referee_first = true;
  for (const auto& referee_item : referee_m) {
    if (!referee_first) referee_o += ',';
    referee_first = false;
    referee_text referee_key;  // a key that is not a string is quoted, as JSON's must be
    referee_emit(referee_key, std::get<0>(referee_item));
    if (referee_key.empty() || referee_key[0] != '"') {
      referee_text referee_quoted;
      referee_emit(referee_quoted, referee_key);
      referee_key = referee_quoted;
    }
    referee_o += referee_key;
    referee_o += ':';
    referee_emit(referee_o, std::get<1>(referee_item));
  }
  referee_o += '}';
}
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::vector<RefereeT, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::deque<RefereeT, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, class RefereeA>
void referee_emit(referee_text& referee_o, const std::list<RefereeT, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::set<RefereeT, RefereeC, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::multiset<RefereeT, RefereeC, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, class RefereeH, class RefereeE, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::unordered_set<RefereeT, RefereeH, RefereeE, RefereeA>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeT, std::size_t RefereeN>
void referee_emit(referee_text& referee_o, const std::array<RefereeT, RefereeN>& referee_v) {
  referee_items(referee_o, referee_v);
}
template <class RefereeK, class RefereeV, class RefereeC, class RefereeA>
void referee_emit(referee_text& referee_o,
                  const std::map<RefereeK, RefereeV, RefereeC, RefereeA>& referee_v) {
  referee_object(referee_o, referee_v);
}
template <class RefereeK, class RefereeV, class RefereeH, class RefereeE, class RefereeA>
void referee_emit(
    referee_text& referee_o,
    const std::unordered_map<RefereeK, RefereeV, RefereeH, RefereeE, RefereeA>& referee_v) {
  referee_object(referee_o, referee_v);
}
template <class RefereeA, class RefereeB>
void referee_emit(referee_text& referee_o, const std::pair<RefereeA, RefereeB>& referee_v) {
  referee_o += '[';
  referee_emit(referee_o, std::get<0>(referee_v));
  referee_o += ',';
  referee_emit(referee_o, std::get<1>(referee_v));
  referee_o += ']';
}
template <class... RefereeT>
void referee_emit(referee_text& referee_o, const std::tuple<RefereeT...>& referee_v) {
  referee_o += '[';
  bool referee_first = true;
  std::apply(
      [&](const auto&... referee_item) {
        ((referee_o += referee_first ? "" : ",", referee_first = false,
          referee_emit(referee_o, referee_item)),
         ...);
      },
      referee_v);
  referee_o += ']';
}
template <class RefereeT>
void referee_emit(referee_text& referee_o, const std::optional<RefereeT>& referee_v) {
  if (referee_v) {
    referee_emit(referee_o, *referee_v);
  } else {
    referee_o += "null";
  }
}
template <class RefereeF>
void referee_result(referee_text& referee_o, RefereeF&& referee_call) {
  if constexpr (std::is_void_v<decltype(referee_call())>) {
    referee_call();
    referee_o += "null";
  } else {
    referee_emit(referee_o, referee_call());
  }
}
}  // namespace referee_driver

signed main() {
  std::string referee_line;
  std::getline(std::cin, referee_line);
  long long referee_case = std::atoll(referee_line.c_str());
  std::string referee_out;
  using referee_args = referee_driver::referee_fn<decltype(&@FUNCTION@)>::referee_params;
  switch (referee_case) {
@CASES@
    default:
      std::fputs("referee: no such case\n", stderr);
      return 2;
  }
  std::cout.flush();
  std::fflush(stdout);
  std::string referee_text = std::string("\n@MARKER@\n") + referee_out + "\n";
  std::fwrite(referee_text.data(), 1, referee_text.size(), stdout);
  std::fflush(stdout);
  return 0;
}
