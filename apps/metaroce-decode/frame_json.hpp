// One decoded frame as one JSON object (the line format of metaroce-decode;
// keys are listed in doc/WIRE.md, "Decoder output").
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace metaroce::apps {

struct DecodedLine {
  std::string json;
  bool ok = false;  // false: the object carries an "error" key
};

DecodedLine frame_to_json(std::uint64_t frame_number, std::span<const std::uint8_t> frame,
                          std::uint32_t linktype, bool verify_icrc);

}  // namespace metaroce::apps
