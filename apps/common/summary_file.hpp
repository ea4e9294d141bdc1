// Writes an app's JSON summary (--json FILE): the text and a newline.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace metaroce::apps {

// False with a one-line error naming the file and what to check.
inline bool write_summary_file(const std::string& path, const std::string& json, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    error = "--json: cannot open '" + path + "' for writing: " + std::strerror(errno) +
            "; check the directory exists and is writable";
    return false;
  }
  const bool written = std::fwrite(json.data(), 1, json.size(), f) == json.size() && std::fputc('\n', f) != EOF;
  if (std::fclose(f) != 0 || !written) {
    error = "--json: writing '" + path + "' failed (disk full?)";
    return false;
  }
  return true;
}

}  // namespace metaroce::apps
