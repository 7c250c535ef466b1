// file_names.h — tensor names as parts of file names, reversibly (docs/schema.md, "Names in
// file names").
//
// A model's input names are whatever its framework wrote: `gpu_0/data_0` (Caffe2),
// `input_1:0` (TensorFlow), `input.1` (PyTorch), spaces, non-ASCII. kdflow and kdflow_tvm
// store an input as `input_<encoded name>.npy`, where the encoding keeps the bytes
// [A-Za-z0-9._-] and writes every other byte of the name's UTF-8 as `%XX` (upper-case hex),
// `%` itself included. So `gpu_0/data_0` is `input_gpu_0%2Fdata_0.npy`, `input.1` stays
// `input_input.1.npy`, and every name round-trips. Everything kdflow prints or writes names
// the original name; the encoded form is only ever a file name, or accepted where a user
// types a name (`--input`, `--input-shape`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kdflow {

/// The name as a file-name part: [A-Za-z0-9._-] kept, every other byte `%XX`.
std::string encode_name(std::string_view name);

/// The inverse of encode_name: `%XX` decoded (either case of hex); nullopt for a `%` not
/// followed by two hex digits.
std::optional<std::string> decode_name(std::string_view part);

/// `input_<encode_name(name)>.npy`.
std::string input_file_name(std::string_view name);

/// The files an input may be stored in, in the order to look for them: the encoded name,
/// then (folders written before the encoding, where the name itself is a valid file name and
/// differs) `input_<name>.npy`.
std::vector<std::string> input_file_candidates(std::string_view name);

/// The file in folder `dir` that holds input `name`: the first of input_file_candidates that
/// exists, as `dir/file`; "" when none does.
std::string find_input_file(const std::string& dir, std::string_view name);

/// Whether `typed` names `name`: equal to it, or to its encoded form, or decoding to it.
bool names_match(std::string_view typed, std::string_view name);

/// `NAME=VALUE` as typed on a command line, where NAME may itself contain `=`: the split whose
/// NAME matches (names_match) one of `names`, preferring the longest NAME; without a match,
/// the split at the first `=` (the caller reports the unknown name). nullopt without `=`.
std::optional<std::pair<std::string, std::string>> split_name_value(std::string_view spec,
                                                                    const std::vector<std::string>& names);

}  // namespace kdflow
