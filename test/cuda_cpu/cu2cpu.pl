#!/usr/bin/perl
# cu2cpu.pl: rewrites a .cu file, and every project header it includes, into C++ that g++ compiles
# with cuda_cpu.h force-included. Only two constructs change; everything else is copied verbatim:
#   kernel<<<grid, block, smem, stream>>>(args);
#     -> cuda_cpu_launch("kernel", key, grid, block, smem, stream, [&]() { kernel(args); });
#   extern __shared__ T name[];   ->   T* name = (T*)cuda_cpu_dynamic_smem();
# Each output starts with a #line naming the original, and keeps its line count, so compiler
# messages point at the original source.
#
# usage: cu2cpu.pl -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [-I DIR]... SOURCE
# Writes OUTDIR/SOURCE and OUTDIR/<path> for each file reached through #include "..." (or <...>
# found in a -I DIR) that lies under the current directory. Compile OUTDIR/SOURCE with
# -I OUTDIR/DIR ahead of each -I DIR so the rewritten copies shadow the originals.
# --prune deletes every other file under OUTDIR (which must end in .gen), so a header that was
# removed or moved cannot linger there and shadow the real one.
use strict;
use warnings;
use Cwd qw(getcwd abs_path);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Spec;

my ($outdir, $depfile, $target, $prune, @incdirs, $source);
while (@ARGV) {
    my $a = shift @ARGV;
    if ($a eq '-o') { $outdir = shift @ARGV; }
    elsif ($a eq '-d') { $depfile = shift @ARGV; }
    elsif ($a eq '-t') { $target = shift @ARGV; }
    elsif ($a eq '--prune') { $prune = 1; }
    elsif ($a =~ /^-I(.*)$/) { push @incdirs, ($1 ne '' ? $1 : shift @ARGV); }
    elsif (!defined $source) { $source = $a; }
    else { die "cu2cpu.pl: unexpected argument '$a'; expected: -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [-I DIR]... SOURCE\n"; }
}
die "cu2cpu.pl: expected: -o OUTDIR [-d DEPFILE -t TARGET] [--prune] [-I DIR]... SOURCE\n" unless defined $outdir && defined $source;
die "cu2cpu.pl: $source: no such file\n" unless -f $source;
die "cu2cpu.pl: --prune needs an OUTDIR whose name ends in .gen, not '$outdir'\n" if $prune && $outdir !~ /\.gen\/?$/;
my $root = getcwd();

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
        if ($label =~ /<.*>$/s) { $key = "(const void*)&$kernel" if $template_kernel{$base} && !$plain_kernel{$base}; }
        elsif ($plain_kernel{$base} && !$template_kernel{$base}) { $key = "(const void*)&$kernel"; }
        (my $qlabel = $label) =~ s/(["\\])/\\$1/g;
        my $rep = sprintf('cuda_cpu_launch("%s", %s, %s, %s, %s, %s, [&]() { %s(%s); })',
                          $qlabel, $key, map({ s/^\s+|\s+$//gr } @cfg), $kernel, $args);
        my $orig = substr($t, $k, $close - $k);
        my $missing = ($orig =~ tr/\n//) - ($rep =~ tr/\n//);
        $rep .= "\n" x $missing if $missing > 0;
        push @edits, [$k, $close, $rep];
        pos($m) = $close;
    }
    while ($m =~ /\bextern\s+__shared__\s+([^;\[\]]*?)\s*\b(\w+)\s*\[\s*\]\s*;/g) {
        my ($s0, $e0, $name) = ($-[0], $+[0], $2);
        my $type = substr($t, $-[1], $+[1] - $-[1]);
        $type =~ s/__align__\s*\(\s*\w+\s*\)|alignas\s*\(\s*\w+\s*\)|__attribute__\s*\(\(.*?\)\)//g;
        $type =~ s/^\s+|\s+$//g;
        $type =~ s/\s+/ /g;
        my $orig = substr($t, $s0, $e0 - $s0);
        my $rep = "$type* $name = ($type*)cuda_cpu_dynamic_smem();" . ("\n" x ($orig =~ tr/\n//));
        push @edits, [$s0, $e0, $rep];
    }
    for my $e (sort { $b->[0] <=> $a->[0] } @edits) {
        substr($t, $e->[0], $e->[1] - $e->[0]) = $e->[2];
    }
    return "#line 1 \"$rel\"\n$t";
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
