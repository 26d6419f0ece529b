// The name a downloaded file is saved under: from the server's Content-Disposition when it
// sends one, else from the URL's last path segment. Both come from the network, so a name
// is only used after safe_file_name() has reduced it to one plain file name that cannot
// reach outside the download folder.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace powerhouse::library {

// "%20" -> " "; a malformed escape is kept as written.
std::string percent_decode(std::string_view text);

// The last path segment of an http(s) URL, percent-decoded, without query or fragment;
// "" when the path ends in '/' or has no segment.
std::string file_name_from_url(std::string_view url);

// The file name of a Content-Disposition header value: `filename*=UTF-8''...` (RFC 6266 /
// 8187, percent-decoded) is preferred to `filename="..."` or `filename=token`; "" when
// neither is present.
std::string file_name_from_content_disposition(std::string_view header);

// `name` reduced to a safe file name: only the part after the last '/' or '\', no control
// characters, at most 255 bytes. "" when nothing usable is left (empty, ".", "..", a
// hidden name starting with '.').
std::string safe_file_name(std::string_view name);

namespace detail {
// ASCII case-insensitive equality: HTTP header names, Content-Disposition parameters.
bool iequals(std::string_view a, std::string_view b);
}  // namespace detail

}  // namespace powerhouse::library
