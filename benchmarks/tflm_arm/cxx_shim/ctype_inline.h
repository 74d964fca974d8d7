// Shim: libstdc++'s newlib ctype_inline.h.
namespace std _GLIBCXX_VISIBILITY(default)
{
_GLIBCXX_BEGIN_NAMESPACE_VERSION
  bool ctype<char>::is(mask __m, char __c) const
  { return _M_table[static_cast<unsigned char>(__c)] & __m; }
  const char* ctype<char>::is(const char* __low, const char* __high, mask* __vec) const
  { while (__low < __high) *__vec++ = _M_table[static_cast<unsigned char>(*__low++)]; return __high; }
  const char* ctype<char>::scan_is(mask __m, const char* __low, const char* __high) const
  { while (__low < __high && !this->is(__m, *__low)) ++__low; return __low; }
  const char* ctype<char>::scan_not(mask __m, const char* __low, const char* __high) const
  { while (__low < __high && this->is(__m, *__low) != 0) ++__low; return __low; }
_GLIBCXX_END_NAMESPACE_VERSION
}
