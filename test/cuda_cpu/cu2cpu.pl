#!/usr/bin/perl
# cu2cpu.pl: rewrites a .cu file, and every project header it includes, into C++ that g++ compiles
# with cuda_cpu.h force-included. These constructs change; everything else is copied verbatim:
#   kernel<<<grid, block, smem, stream>>>(args);
#     -> cuda_cpu_launch("kernel", key, grid, block, smem, stream, [=](auto&... a) { kernel(a...); }, args);
#   extern __shared__ T name[];   ->   T* name = (T*)cuda_cpu_dynamic_smem();
#   __shared__ T name[N];  (inside a function)
#     -> static char site; auto& name = *cuda_cpu_shared<T[N]>(&site, "name");
#   __global__ void __launch_bounds__(B) kernel(...) {
#     -> __global__ void __launch_bounds__(B) kernel(...) { cuda_cpu_launch_bounds(B); cuda_cpu_kernel_entry();
#   __global__ void kernel(...) {   ->   __global__ void kernel(...) { cuda_cpu_kernel_entry();
#   __device__ T name...;  (namespace scope)   ->   __device__ CUDA_CPU_DEVICE_VAR T name...;
#     (also __constant__; CUDA_CPU_DEVICE_CONST for const ones)
# Each output starts with a #line naming the original, and keeps its line count, so compiler
# messages point at the original source.
#
# usage: cu2cpu.pl -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [--compile-dir DIR] [-I DIR]... SOURCE
# Writes OUTDIR/SOURCE and OUTDIR/<path> for each file reached through #include "..." (or <...>
# found in a -I DIR) that lies under the current directory. Compile OUTDIR/SOURCE with
# -I OUTDIR/DIR ahead of each -I DIR so the rewritten copies shadow the originals.
# --prune deletes every other file under OUTDIR (which must end in .gen), so a header that was
# removed or moved cannot linger there and shadow the real one.
# --compile-dir DIR: the compiler runs in DIR, not here: the #line paths are absolute.
use strict;
use warnings;
use Cwd qw(getcwd abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Spec;

my ($outdir, $depfile, $target, $prune, $compile_dir, @incdirs, $source);
while (@ARGV) {
    my $a = shift @ARGV;
    if ($a eq '-o') { $outdir = shift @ARGV; }
    elsif ($a eq '-d') { $depfile = shift @ARGV; }
    elsif ($a eq '-t') { $target = shift @ARGV; }
    elsif ($a eq '--prune') { $prune = 1; }
    elsif ($a eq '--compile-dir') { $compile_dir = shift @ARGV; }
    elsif ($a =~ /^-I(.*)$/) { push @incdirs, ($1 ne '' ? $1 : shift @ARGV); }
    elsif (!defined $source) { $source = $a; }
    else { die "cu2cpu.pl: unexpected argument '$a'; expected: -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [--compile-dir DIR] [-I DIR]... SOURCE\n"; }
}
die "cu2cpu.pl: expected: -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [--compile-dir DIR] [-I DIR]... SOURCE\n" unless defined $outdir && defined $source;
die "cu2cpu.pl: $source: no such file\n" unless -f $source;
die "cu2cpu.pl: --prune needs an OUTDIR whose name ends in .gen, not '$outdir'\n" if $prune && $outdir !~ /\.gen\/?$/;
my $root = getcwd();
die "cu2cpu.pl: --compile-dir $compile_dir: no such directory\n" if defined $compile_dir && !-d $compile_dir;

# Project-relative path of a file, or undef when it lies outside the current directory.
sub project_path {
    my ($path) = @_;
    my $abs = abs_path($path) // return undef;
    my $rel = File::Spec->abs2rel($abs, $root);
    return undef if $rel =~ m{^\.\.(/|$)} || File::Spec->file_name_is_absolute($rel);
    return $rel;
}

sub read_file {
    my ($path) = @_;
    open(my $fh, '<', $path) or die "cu2cpu.pl: cannot read $path: $!\n";
    local $/;
    my $text = <$fh>;
    close $fh;
    return $text;
}

# Blanks comments (both masks) and string/char literals (the full mask only), keeping every offset
# and newline, so searches never match inside them while edits still apply to the original text.
sub masks {
    my ($t) = @_;
    my $nocomment = $t;
    my $full = $t;
    my $n = length $t;
    my $i = 0;
    while ($i < $n) {
        my $c = substr($t, $i, 1);
        my $c2 = substr($t, $i, 2);
        my $end;
        my $is_comment = 0;
        if ($c2 eq '//') {
            $end = index($t, "\n", $i);
            $end = $n if $end < 0;
            $is_comment = 1;
        } elsif ($c2 eq '/*') {
            $end = index($t, '*/', $i + 2);
            $end = $end < 0 ? $n : $end + 2;
            $is_comment = 1;
        } elsif ($c eq '"' || $c eq "'") {
            # A ' between digits is a C++14 digit separator, not a literal.
            if ($c eq "'" && $i > 0 && substr($t, $i - 1, 1) =~ /[0-9a-fA-F]/ && substr($t, $i + 1, 1) =~ /[0-9a-fA-F]/) { $i++; next; }
            $end = $i + 1;
            while ($end < $n) {
                my $d = substr($t, $end, 1);
                if ($d eq '\\') { $end += 2; next; }
                if ($d eq $c || $d eq "\n") { $end++; last; }
                $end++;
            }
        } else {
            $i++;
            next;
        }
        $end = $n if $end > $n;
        my $blank = substr($t, $i, $end - $i);
        $blank =~ s/[^\n]/ /g;
        # Keep the quotes so an #include "..." line still parses in the no-comment mask.
        substr($nocomment, $i, $end - $i) = $blank if $is_comment;
        substr($full, $i + 1, $end - $i - 2) = substr($blank, 1, $end - $i - 2) if !$is_comment && $end - $i >= 2;
        substr($full, $i, $end - $i) = $blank if $is_comment;
        $i = $end;
    }
    return ($nocomment, $full);
}

# ---- gather the files: the source and every project file it includes ----
my %files;    # rel path -> { text, nocomment, full }
my @order;
my @queue = (project_path($source) // die "cu2cpu.pl: $source lies outside the current directory\n");
while (@queue) {
    my $rel = shift @queue;
    next if $files{$rel};
    my $text = read_file($rel);
    my ($nocomment, $full) = masks($text);
    $files{$rel} = { text => $text, nocomment => $nocomment, full => $full };
    push @order, $rel;
    while ($nocomment =~ /^[ \t]*#[ \t]*include[ \t]*(["<])([^">\n]+)[">]/mg) {
        my ($kind, $name) = ($1, $2);
        my @dirs = (($kind eq '"' ? (dirname($rel)) : ()), @incdirs);
        for my $d (@dirs) {
            my $cand = File::Spec->catfile($d, $name);
            next unless -f $cand;
            my $p = project_path($cand);
            push @queue, $p if defined $p;
            last;
        }
    }
}

# ---- kernels: which names are templates (their address needs explicit template arguments) ----
my (%plain_kernel, %template_kernel);
for my $rel (@order) {
    my $m = $files{$rel}{full};
    $m =~ s/__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)/ /g;
    while ($m =~ /__global__([^(;{}]*)\(/g) {
        my $decl = $1;
        my $at = $-[0];
        next unless $decl =~ /(\w+)\s*$/;
        my $name = $1;
        my $before = substr($m, 0, $at);
        $before =~ s/.*[;{}]//s;
        $before =~ s/^.*\n[ \t]*#[^\n]*//s;
        if ($before =~ /\btemplate\s*</) { $template_kernel{$name} = 1; }
        else { $plain_kernel{$name} = 1; }
    }
}

# Names also declared as functions that are not kernels (a kernel and its host launcher may share a
# name, as nvcc allows): '&name' would be ambiguous there, so such a launch gets no key.
my %plain_function;
my %not_decl = map { $_ => 1 } qw(return else case new delete throw sizeof alignof decltype typeid co_return co_yield do);
for my $rel (@order) {
    my $m = $files{$rel}{full};
    $m =~ s/^[ \t]*#[^\n]*//mg;
    while ($m =~ /\b(\w+)\s*\(/g) {
        my ($name, $at) = ($1, $-[0]);
        next unless $plain_kernel{$name} || $template_kernel{$name};
        my $before = substr($m, 0, $at);
        next unless $before =~ /([\w*&>])\s*$/;
        next if $before =~ /\b(\w+)\s*$/ && $not_decl{$1};
        (my $stmt = $before) =~ s/.*[;{}]//s;
        next if $stmt =~ /__global__/ || $stmt =~ /[=(,]/;
        $plain_function{$name} = 1;
    }
}

# Offset just past the bracket that closes the one at $open, skipping nested ()[]{}.
sub match_close {
    my ($m, $open) = @_;
    my $depth = 0;
    for (my $i = $open; $i < length $m; $i++) {
        my $c = substr($m, $i, 1);
        if ($c =~ /[(\[{]/) { $depth++; }
        elsif ($c =~ /[)\]}]/) { $depth--; return $i + 1 if $depth == 0; }
    }
    return -1;
}

# Splits $s at commas outside brackets.
sub split_top {
    my ($s, $mask) = @_;
    my @parts;
    my ($depth, $start) = (0, 0);
    for (my $i = 0; $i < length $mask; $i++) {
        my $c = substr($mask, $i, 1);
        if ($c =~ /[(\[{]/) { $depth++; }
        elsif ($c =~ /[)\]}]/) { $depth--; }
        elsif ($c eq ',' && $depth == 0) { push @parts, substr($s, $start, $i - $start); $start = $i + 1; }
    }
    push @parts, substr($s, $start);
    return @parts;
}

sub line_of {
    my ($t, $off) = @_;
    return 1 + (substr($t, 0, $off) =~ tr/\n//);
}

# Is offset $pos inside a function body (or a block in one)? A brace opens a declaration scope when
# what precedes it names a namespace, class, struct, union, enum or extern "C" (outside a template's
# parameter list); any other opens code.
sub in_function {
    my ($m, $pos) = @_;
    my @stack;
    my $head_start = 0;
    for (my $i = 0; $i < $pos; $i++) {
        my $c = substr($m, $i, 1);
        if ($c eq '{') {
            my $head = substr($m, $head_start, $i - $head_start);
            # a template's parameter list (template <class T>) declares no class scope
            $head =~ s/\btemplate\s*(<(?:[^<>]++|(?1))*>)//g;
            push @stack, ($head =~ /\b(?:namespace|struct|class|union|enum)\b|\bextern\s*"/ ? 'decl' : 'code');
            $head_start = $i + 1;
        } elsif ($c eq '}') {
            pop @stack;
            $head_start = $i + 1;
        } elsif ($c eq ';') {
            $head_start = $i + 1;
        }
    }
    return scalar grep { $_ eq 'code' } @stack;
}

# Static __shared__ declarations inside functions become references to the block's copy, which the
# runtime places in shared memory (NaN-filled at every block start, bounds-checked, counted against
# the block's limit). Declarations it cannot take apart keep the thread_local fallback.
my $site_counter = 0;
sub shared_edits {
    my ($rel, $t, $m) = @_;
    my @out;
    (my $code = $m) =~ s/^([ \t]*#[^\n]*)/' ' x length($1)/mge;
    while ($code =~ /\b__shared__\b/g) {
        my $at = $-[0];
        my $start = $at;
        $start-- while $start > 0 && substr($code, $start - 1, 1) !~ /[;{}]/;
        my $end = index($code, ';', $at);
        next if $end < 0;
        my $decl = substr($code, $start, $end - $start);
        next if $decl =~ /\bextern\b/ || $decl =~ /[={}]/;
        next unless in_function($code, $start);
        my $orig = substr($t, $start, $end + 1 - $start);
        my $lead = ($decl =~ /^(\s*)/)[0];
        my $text = substr($t, $start + length($lead), $end - $start - length($lead));
        my $align = '';
        $align = $1 if $text =~ s/(?:__align__|alignas)\s*\(\s*([^()]+?)\s*\)//;
        $align = $1 if $text =~ s/__attribute__\s*\(\(\s*aligned\s*\(\s*([^()]+?)\s*\)\s*\)\)//;
        $text =~ s/\b(?:__shared__|static)\b//g;
        $text =~ s/\s+/ /g;
        $text =~ s/^\s+|\s+$//g;
        # TYPE DECLARATOR, DECLARATOR...: simple declarators only (pointers, a name, array bounds)
        my @chunks = split_top($text, $text);
        my ($type, @decls);
        my $ok = 1;
        for my $i (0 .. $#chunks) {
            my $ch = $chunks[$i];
            $ch =~ s/^\s+|\s+$//g;
            if ($ch =~ /\(/) { $ok = 0; last; }
            if ($i == 0) {
                unless ($ch =~ /^(.*?[\w>])\s*([*&\s]*?)\s*\b(\w+)\s*((?:\[[^\[\]]*\]\s*)*)$/s && $1 ne '') { $ok = 0; last; }
                $type = $1;
                push @decls, [$2, $3, $4];
            } else {
                unless ($ch =~ /^([*&\s]*?)\s*\b(\w+)\s*((?:\[[^\[\]]*\]\s*)*)$/s) { $ok = 0; last; }
                push @decls, [$1, $2, $3];
            }
        }
        next unless $ok && defined $type && $type =~ /\w/ && $type !~ /^(?:const|volatile|unsigned|signed|long|short)$/;
        my $rep = $lead;
        my $line = line_of($t, $start);
        for my $d (@decls) {
            my ($ptr, $name, $dims) = @$d;
            $ptr =~ s/\s+//g;
            $dims =~ s/\s+$//;
            my $site = "cuda_cpu_site_${line}_" . $site_counter++;
            my $tid = "$type$ptr$dims";
            $rep .= sprintf('static char %s; auto& %s = *cuda_cpu_shared<%s>(&%s, "%s"%s); ', $site, $name, $tid, $site, $name,
                            $align ne '' ? ", $align" : '');
        }
        $rep =~ s/ $//;
        my $missing = ($orig =~ tr/\n//) - ($rep =~ tr/\n//);
        $rep .= "\n" x $missing if $missing > 0;
        push @out, [$start, $end + 1, $rep];
    }
    return @out;
}

# Every kernel definition starts with cuda_cpu_kernel_entry(): the runtime checks the launch against
# the kernel's resources (its registers, from ptxas) there, once per launch.
sub entry_edits {
    my ($t, $m) = @_;
    my @out;
    (my $code = $m) =~ s/^([ \t]*#[^\n]*)/' ' x length($1)/mge;
    $code =~ s/__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)/' ' x length($&)/ge;
    while ($code =~ /\b__global__\b/g) {
        my $params = index($code, '(', $+[0]);
        next if $params < 0;
        my $between = substr($code, $+[0], $params - $+[0]);
        next if $between =~ /[;{}]/;
        my $pclose = match_close($code, $params);
        next if $pclose < 0;
        my $i = $pclose;
        $i++ while $i < length($code) && substr($code, $i, 1) =~ /\s/;
        next unless $i < length($code) && substr($code, $i, 1) eq '{';
        push @out, [$i + 1, $i + 1, " cuda_cpu_kernel_entry();"];
        pos($code) = $i;
    }
    return @out;
}

# Namespace-scope __device__ and __constant__ variables go to a section of their own (two: const
# ones apart), so the runtime knows them as device memory: saved and restored between schedules,
# race-checked, and told apart from host globals, which a kernel cannot see.
sub devvar_edits {
    my ($t, $m) = @_;
    my @out;
    (my $code = $m) =~ s/^([ \t]*#[^\n]*)/' ' x length($1)/mge;
    while ($code =~ /\b(?:__device__|__constant__)\b/g) {
        my ($at, $end) = ($-[0], $+[0]);
        next if in_function($code, $at);
        my $start = $at;
        $start-- while $start > 0 && substr($code, $start - 1, 1) !~ /[;{}]/;
        my $rest = substr($code, $start);
        next unless $rest =~ /^([^;{(=\[]*)([;{(=\[])/;
        my ($head, $stop) = ($1, $2);
        next if $stop eq '(' || $stop eq '{';                 # a function
        next if $head =~ /\b(?:template|typedef|using|__global__|__host__|struct|class|enum|union)\b/;
        next if substr($code, $end) =~ /^\s*(?:__device__|__constant__|__managed__)\b/;  # the last keyword takes it
        my $const = $head =~ /\bconst\b|\bconstexpr\b/ ? 'CUDA_CPU_DEVICE_CONST' : 'CUDA_CPU_DEVICE_VAR';
        next if $head =~ /\bconstexpr\b/;                   # no storage to speak of
        push @out, [$end, $end, " $const"];
    }
    return @out;
}

# __launch_bounds__(ARGS) on a kernel definition: the runtime checks the block size against it at the
# top of the body.
sub bounds_edits {
    my ($t, $m) = @_;
    my @out;
    while ($m =~ /\b__launch_bounds__\s*\(/g) {
        my $open = $+[0] - 1;
        my $close = match_close($m, $open);
        next if $close < 0;
        (my $args = substr($t, $open + 1, $close - $open - 2)) =~ s/\s+/ /g;
        my $params = index($m, '(', $close);
        next if $params < 0;
        my $pclose = match_close($m, $params);
        next if $pclose < 0;
        my $i = $pclose;
        $i++ while $i < length($m) && substr($m, $i, 1) =~ /\s/;
        next unless $i < length($m) && substr($m, $i, 1) eq '{';
        push @out, [$i + 1, $i + 1, " cuda_cpu_launch_bounds($args);"];
        pos($m) = $i;
    }
    return @out;
}

sub rewrite {
    my ($rel) = @_;
    my ($t, $m) = @{$files{$rel}}{qw(text full)};
    my @edits;  # [start, end, replacement]
    while ($m =~ /<<</g) {
        my $cfg_start = pos($m);
        my $lt = $cfg_start - 3;
        my $where = "$rel:" . line_of($t, $lt);
        # the launch configuration, up to >>> outside brackets
        my ($depth, $gt) = (0, -1);
        for (my $i = $cfg_start; $i < length $m; $i++) {
            my $c = substr($m, $i, 1);
            if ($c =~ /[(\[{]/) { $depth++; }
            elsif ($c =~ /[)\]}]/) { $depth--; }
            elsif ($depth == 0 && substr($m, $i, 3) eq '>>>') { $gt = $i; last; }
            elsif ($c eq ';') { last; }
        }
        die "cu2cpu.pl: $where: '<<<' without a matching '>>>'\n" if $gt < 0;
        my $after = $gt + 3;
        $after++ while $after < length $m && substr($m, $after, 1) =~ /\s/;
        die "cu2cpu.pl: $where: expected '(' with the kernel arguments after '>>>'\n" unless substr($m, $after, 1) eq '(';
        my $close = match_close($m, $after);
        die "cu2cpu.pl: $where: unbalanced parentheses in the kernel arguments\n" if $close < 0;
        # the kernel expression before <<<: a (qualified) name with optional template arguments
        my $k = $lt;
        $k-- while $k > 0 && substr($m, $k - 1, 1) =~ /\s/;
        if ($k > 0 && substr($m, $k - 1, 1) eq '>') {
            my $d = 0;
            while ($k > 0) {
                my $c = substr($m, --$k, 1);
                if ($c eq '>') { $d++; }
                elsif ($c eq '<') { $d--; last if $d == 0; }
            }
            $k-- while $k > 0 && substr($m, $k - 1, 1) =~ /\s/;
        }
        $k-- while $k > 0 && substr($m, $k - 1, 1) =~ /[\w:]/;
        my $kernel = substr($t, $k, $lt - $k);
        $kernel =~ s/\s+$//;
        die "cu2cpu.pl: $where: cannot find the kernel name before '<<<'\n" unless $kernel =~ /\w/;
        my @cfg = split_top(substr($t, $cfg_start, $gt - $cfg_start), substr($m, $cfg_start, $gt - $cfg_start));
        die "cu2cpu.pl: $where: a launch takes 2 to 4 configuration arguments, got " . scalar(@cfg) . "\n" if @cfg < 2 || @cfg > 4;
        push @cfg, '0' while @cfg < 4;
        my $args = substr($t, $after + 1, $close - $after - 2);
        (my $label = $kernel) =~ s/\s+//g;
        my ($base) = $label =~ /(\w+)(?:<.*>)?$/s;
        my $key = 'nullptr';
        if ($plain_function{$base}) { }
        elsif ($label =~ /<.*>$/s) { $key = "(const void*)&$kernel" if $template_kernel{$base} && !$plain_kernel{$base}; }
        elsif ($plain_kernel{$base} && !$template_kernel{$base}) { $key = "(const void*)&$kernel"; }
        (my $qlabel = $label) =~ s/(["\\])/\\$1/g;
        my $argmask = substr($m, $after + 1, $close - $after - 2);
        # The arguments are kept (decayed) before the call: NULL would be kept as an integer, which no
        # pointer parameter takes, so a NULL argument becomes nullptr.
        if ($argmask =~ /\bNULL\b/) {
            my @parts = split_top($args, $argmask);
            s/^(\s*)NULL(\s*)$/$1nullptr$2/ for @parts;
            $args = join(',', @parts);
        }
        my $rep = sprintf('cuda_cpu_launch("%s", %s, %s, %s, %s, %s, [=](auto&... cuda_cpu_a) { %s(cuda_cpu_a...); }%s%s)',
                          $qlabel, $key, map({ s/^\s+|\s+$//gr } @cfg), $kernel, ($argmask =~ /\S/ ? ', ' : ''), $args);
        my $orig = substr($t, $k, $close - $k);
        my $missing = ($orig =~ tr/\n//) - ($rep =~ tr/\n//);
        $rep .= "\n" x $missing if $missing > 0;
        push @edits, [$k, $close, $rep];
        pos($m) = $close;
    }
    # __shared__ before the type or among its words (extern float __shared__ s[];, as some write it)
    while ($m =~ /\bextern\s+([^;\[\]{}"]*?\b__shared__\b[^;\[\]{}]*?)\s*\b(\w+)\s*\[\s*\]\s*;/g) {
        my ($s0, $e0, $name) = ($-[0], $+[0], $2);
        my $type = substr($t, $-[1], $+[1] - $-[1]);
        $type =~ s/\b__shared__\b//;
        $type =~ s/__align__\s*\(\s*\w+\s*\)|alignas\s*\(\s*\w+\s*\)|__attribute__\s*\(\(.*?\)\)//g;
        $type =~ s/^\s+|\s+$//g;
        $type =~ s/\s+/ /g;
        my $orig = substr($t, $s0, $e0 - $s0);
        my $rep = "$type* $name = ($type*)cuda_cpu_dynamic_smem();" . ("\n" x ($orig =~ tr/\n//));
        push @edits, [$s0, $e0, $rep];
    }
    push @edits, shared_edits($rel, $t, $m);
    push @edits, bounds_edits($t, $m);
    push @edits, entry_edits($t, $m);
    push @edits, devvar_edits($t, $m);
    for my $e (sort { $b->[0] <=> $a->[0] || $b->[1] <=> $a->[1] } @edits) {
        substr($t, $e->[0], $e->[1] - $e->[0]) = $e->[2];
    }
    # The original's path: from here, where the compiler runs too (the project's builds); absolute when
    # it runs elsewhere (--compile-dir), so a program rewritten from inside its own checkout still has
    # its compiler messages, and the source lines the runtime prints, name the file the user has.
    my $line = defined $compile_dir ? File::Spec->catfile($root, $rel) : $rel;
    return "#line 1 \"$line\"\n$t";
}

for my $rel (@order) {
    my $out = File::Spec->catfile($outdir, $rel);
    make_path(dirname($out));
    my $text = rewrite($rel);
    if (-f $out && read_file($out) eq $text) { next; }
    open(my $fh, '>', "$out.tmp.$$") or die "cu2cpu.pl: cannot write $out: $!\n";
    print $fh $text;
    close $fh or die "cu2cpu.pl: cannot write $out: $!\n";
    rename("$out.tmp.$$", $out) or die "cu2cpu.pl: cannot rename to $out: $!\n";
}

if (defined $depfile) {
    die "cu2cpu.pl: -d needs -t TARGET\n" unless defined $target;
    make_path(dirname($depfile));
    open(my $fh, '>', $depfile) or die "cu2cpu.pl: cannot write $depfile: $!\n";
    print $fh "$target: " . join(' ', @order) . "\n";
    print $fh "$_:\n" for @order[1 .. $#order];
    close $fh;
}

if ($prune) {
    require File::Find;
    no warnings 'once';
    my %keep = map { (File::Spec->catfile($outdir, $_) => 1) } @order;
    File::Find::finddepth({ no_chdir => 1, wanted => sub {
        my $p = $File::Find::name;
        if (-f $p && !$keep{$p}) { unlink $p; }
        elsif (-d $p && $p ne $outdir) { rmdir $p; }  # removes only directories left empty
    } }, $outdir);
}
