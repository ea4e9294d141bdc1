#pragma once

// --secure[=MODE] and --key-file FILE, shared by metaroce-perf (every role),
// metaroce-gen and metaroce-sink.

#include <string>

#include <boost/program_options.hpp>

#include "secure/keys.hpp"

namespace metaroce::apps {

inline constexpr const char* secure_help =
    "authenticate every packet and connection message with the pre-shared key of --key-file: AES-256-GCM per "
    "packet, keys per connection from X25519; MODE encrypt (the default: payload encrypted too) or auth-only "
    "(payload in the clear). The peer needs the same key file and MODE";
inline constexpr const char* key_file_help =
    "with --secure: the pre-shared key FILE both ends hold (at least 32 random bytes, readable by its owner only; "
    "e.g. head -c 32 /dev/urandom > K && chmod 600 K)";

// Adds --secure[=MODE] and --key-file FILE.
void add_secure_options(boost::program_options::options_description& d);

// Reads --secure[=MODE] and --key-file FILE (the file must load; its key
// into `psk` when given); false with one line naming the fix.
bool read_secure_options(const boost::program_options::variables_map& vm, std::string& key_file, bool& auth_only,
                         std::string& message, secure::Psk* psk = nullptr);

}  // namespace metaroce::apps
