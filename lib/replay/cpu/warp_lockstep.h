// warp_lockstep.h — where the CPU back end must keep a warp's lanes in step that a GPU keeps
// in step by itself. The back end runs a block's threads one after another between barriers;
// a GPU runs the lanes of a warp together. TVM's kernels rely on that in one pattern: each
// lane reads an element that several lanes share, then one store writes it back
// (tir_attention_merge_state: every lane of a row reads S[row], computes, and S[row] is
// stored at the end, the index naming no threadIdx.x). Run lane by lane, the second lane
// reads what the first stored. A warp barrier before such a store gives the GPU's order:
// every lane's reads, then the stores.
#pragma once

#include <cstddef>
#include <vector>

namespace clang {
class ASTContext;
class FunctionDecl;
}  // namespace clang

namespace kdflow::cpu {

/// Byte offsets in the main file where `__syncwarp(); ` goes: before each statement at the top
/// level of a kernel's body (outside every branch and loop, so every lane reaches it) that
/// stores through a pointer parameter at an index naming no threadIdx.x, when the kernel also
/// reads through that parameter. Sorted, unique.
std::vector<size_t> warp_lockstep_points(clang::ASTContext& ctx, const std::vector<const clang::FunctionDecl*>& kernels);

}  // namespace kdflow::cpu
