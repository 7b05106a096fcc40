#!/usr/bin/perl
# llmc_fixes.pl DIR: fixes, in a copy of llm.c's train_gpt2.cu and llmc/ at DIR, the defects the CPU
# runtime reports in it (dev/runtime_corpus.sh runs the copy and llm.c's own side by side). Each fix
# is one line, made in place so line numbers stay; each must match exactly once, or the script stops
# (another llm.c commit needs its fixes looked at again).
use strict;
use warnings;

my $dir = shift // die "usage: llmc_fixes.pl DIR (a copy of llm.c's train_gpt2.cu and llmc/)\n";
my @fixes = (
    # The last block reads the other blocks' partial sums after an atomicInc; the block's stores (which
    # its thread 0 has seen through the barrier before) reach the other blocks before the atomic only
    # with a __threadfence between them in thread 0 (the programming guide's threadFenceReduction).
    ["llmc/layernorm.cuh", qr/\*tmp_flag = atomicInc\(scratchFlag, gridDim\.x\);/,
     sub { "__threadfence(); *tmp_flag = atomicInc(scratchFlag, gridDim.x);" }],
    # blockReduce in a loop reuses its shared slots: without its final barrier the next iteration's
    # writes race with this one's reads (blockReduce's own comment says so).
    ["llmc/attention.cuh", qr/local_sum = blockReduce<warpReduceSum>\(local_sum\);/,
     sub { "local_sum = blockReduce<warpReduceSum>(local_sum, true);" }],
    # The tail past the last multiple of x128::size: each thread steps by the block, not by one (with
    # i++ threads overlap, and one reads a logit another already overwrote with its gradient).
    ["llmc/fused_classifier.cuh", qr/for \(int i = threadIdx\.x \+ unaligned_start; i < V; i\+\+\)/,
     sub { "for (int i = threadIdx.x + unaligned_start; i < V; i += blockDim.x)" }],
    # (i+1)*x128::size is a size_t: for a thread whose i starts below -1 (V below blockDim.x *
    # x128::size) it is a huge value, and the loop runs on until i itself overflows (undefined in C++,
    # millions of iterations where a GPU wraps); compared as an int it ends at once.
    ["llmc/fused_classifier.cuh", qr/while \(\(i\+1\)\*x128::size > V\)/,
     sub { "while ((i+1)*(int)x128::size > V)" }],
);
for my $f (@fixes) {
    my ($file, $re, $rep) = @$f;
    my $path = "$dir/$file";
    open(my $in, '<', $path) or die "llmc_fixes.pl: cannot read $path: $!\n";
    local $/;
    my $t = <$in>;
    close $in;
    my $n = () = $t =~ /$re/g;
    die "llmc_fixes.pl: $path: expected one match of $re, found $n\n" unless $n == 1;
    $t =~ s/$re/$rep->()/e;
    open(my $out, '>', "$path.tmp") or die "llmc_fixes.pl: cannot write $path.tmp: $!\n";
    print $out $t;
    close $out or die "llmc_fixes.pl: cannot write $path.tmp: $!\n";
    rename("$path.tmp", $path) or die "llmc_fixes.pl: cannot replace $path: $!\n";
}
print "llmc_fixes.pl: ", scalar(@fixes), " fixes made in $dir\n";
