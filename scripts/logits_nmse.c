/* logits_nmse A.bin REF.bin [BOUND]: normalized mean squared error
 * sum((a - ref)^2) / sum(ref^2) of two float32 files of the same length
 * (brigade eval --logits-out), printed; exit 1 above BOUND (if given) or
 * when the files differ in length, 2 when they cannot be read.
 * Used by scripts/gpu-check.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: logits_nmse A.bin REF.bin [BOUND]\n");
        return 2;
    }
    FILE *a = fopen(argv[1], "rb"), *r = fopen(argv[2], "rb");
    if (!a || !r) {
        fprintf(stderr, "logits_nmse: cannot open %s\n", !a ? argv[1] : argv[2]);
        return 2;
    }
    double num = 0, den = 0;
    unsigned long long n = 0;
    float x, y;
    int ga, gr;
    for (;;) {
        ga = fread(&x, sizeof x, 1, a) == 1;
        gr = fread(&y, sizeof y, 1, r) == 1;
        if (!ga || !gr)
            break;
        if (!isfinite(x)) {
            printf("nan\n");
            return 1;
        }
        num += ((double)x - y) * ((double)x - y);
        den += (double)y * y;
        n++;
    }
    if (ga != gr || n == 0) {
        printf("length-mismatch\n");
        return 1;
    }
    double e = den > 0 ? num / den : num;
    printf("%.3g\n", e);
    return argc > 3 && e > atof(argv[3]) ? 1 : 0;
}
