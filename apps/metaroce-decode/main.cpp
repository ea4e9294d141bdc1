// metaroce-decode: one JSON object per frame of a capture, one per line.
#include <cstdio>
#include <iostream>
#include <string>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "common/pcap_file.hpp"
#include "metaroce-decode/frame_json.hpp"

namespace po = boost::program_options;

namespace {

constexpr int exit_all_decoded = 0;
constexpr int exit_some_bad = 1;
constexpr int exit_usage = 2;

void print_usage(const po::options_description& options) {
  std::cout << "Usage: metaroce-decode [OPTIONS] FILE\n"
               "Decodes a pcap or pcapng capture of RoCEv2 and metaroce frames and prints one\n"
               "JSON object per frame, one per line (keys: doc/WIRE.md, \"Decoder output\").\n"
               "Exit status: 0 every frame decoded, 1 some frame did not (its line has \"error\"),\n"
               "2 usage or file error.\n\n"
            << options;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options("Options");
  options.add_options()
      ("help,h", "print this help and exit")
      ("no-icrc", "do not verify the ICRC (for captures of NICs that strip or offload it)")
      ("count,c", po::value<std::uint64_t>(), "stop after this many frames");
  po::options_description hidden;
  hidden.add_options()("file", po::value<std::string>(), "capture file");
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("file", 1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "metaroce-decode: " << e.what() << "\nTry 'metaroce-decode --help'.\n";
    return exit_usage;
  }
  if (vm.count("help")) {
    print_usage(options);
    return exit_all_decoded;
  }
  if (!vm.count("file")) {
    std::cerr << "metaroce-decode: no capture file given.\nUsage: metaroce-decode [OPTIONS] FILE "
                 "(try --help)\n";
    return exit_usage;
  }
  const std::string path = vm["file"].as<std::string>();
  const bool verify_icrc = !vm.count("no-icrc");
  const std::uint64_t limit = vm.count("count") ? vm["count"].as<std::uint64_t>() : UINT64_MAX;

  metaroce::apps::PcapReader reader;
  std::string error;
  if (!reader.open(path, error)) {
    std::cerr << "metaroce-decode: " << error << "\n";
    return exit_usage;
  }
  metaroce::apps::PcapRecord record;
  std::uint64_t frame = 0;
  bool all_ok = true;
  std::string out;
  while (frame < limit && reader.next(record)) {
    ++frame;
    auto line = metaroce::apps::frame_to_json(frame, record.data, record.linktype, verify_icrc);
    all_ok = all_ok && line.ok;
    out.append(line.json);
    out.push_back('\n');
    if (out.size() > (1u << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!reader.error().empty()) {
    std::cerr << "metaroce-decode: " << path << ": after frame " << frame << ": " << reader.error() << "\n";
    return exit_usage;
  }
  return all_ok ? exit_all_decoded : exit_some_bad;
}
