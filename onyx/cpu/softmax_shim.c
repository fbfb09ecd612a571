
/* Row softmax in vector registers (compiled after blas_shim.c, whose `vf`, `VL` and `INLINE` it
   uses; see onyx/cpu/exp.py, which calls it for the large softmaxes of prompt chunks). MLX's CPU
   backend computes exp one element at a time; here a row's max, exps, sum and division each run
   over whole vectors, so the softmax of a chunk's scores over a long history costs what reading
   and writing them costs.

   exp(d) for d = x - max <= 0 is the range reduction of onyx/cpu/exp.py (d = n ln2 + r,
   |r| <= ln2/2, a degree-7 polynomial for e^r, 2^n written into the exponent bits); below
   -87.33 (e^d under float32's smallest normal, and every -inf of a masked entry) it is 0. The sum
   runs over VL lanes in a fixed order, then over the lanes, so a row's result depends on its
   values alone: the same whatever rows share the call. */
typedef int vi __attribute__((vector_size(sizeof(vf))));

INLINE vf vexp_nonpositive(vf d) {
    const vf lo = (vf){0} - 87.33654f;
    const vi under = d < lo;
    d = (vf)(((vi)d & ~under) | ((vi)lo & under));
    const vf t = d * 1.4426950408889634f + 0.5f;
    vi n = __builtin_convertvector(t, vi);                 /* toward zero: */
    n += (vi)(__builtin_convertvector(n, vf) > t);          /* floor (true is -1) */
    const vf nf = __builtin_convertvector(n, vf);
    const vf r = d - nf * 0.693359375f - nf * -2.12194440e-4f;
    vf p = (vf){0} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const vf e = (p * (r * r) + r + 1.0f) * (vf)((n + 127) << 23);
    return (vf)((vi)e & ~under);
}

/* y[i, :] = softmax(x[i, :]) for `rows` rows of `cols` floats (row strides ldx, ldy). A row
   whose every entry is -inf gives NaN, as the division by a zero sum does. */
void onyx_softmax_rows(const float *x, long ldx, float *y, long ldy, long rows, long cols) {
    const long cv = cols - cols % VL;
    for (long i = 0; i < rows; i++) {
        const float *xi = x + i * ldx;
        float *yi = y + i * ldy;
        float m = -__builtin_inff();
        vf mv = (vf){0} + m;
        for (long j = 0; j < cv; j += VL) {
            vf v;
            memcpy(&v, xi + j, sizeof v);
            const vi gt = v > mv;
            mv = (vf)(((vi)v & gt) | ((vi)mv & ~gt));
        }
        for (int l = 0; l < VL; l++) m = mv[l] > m ? mv[l] : m;
        for (long j = cv; j < cols; j++) m = xi[j] > m ? xi[j] : m;
        const vf mb = (vf){0} + m;
        vf sv = (vf){0};
        for (long j = 0; j < cv; j += VL) {
            vf v;
            memcpy(&v, xi + j, sizeof v);
            const vf e = vexp_nonpositive(v - mb);
            memcpy(yi + j, &e, sizeof e);
            sv += e;
        }
        float s = 0.0f;
        for (int l = 0; l < VL; l++) s += sv[l];
        for (long j = cv; j < cols; j++) {
            vf v = (vf){0} + (xi[j] - m);
            const float e = vexp_nonpositive(v)[0];
            yi[j] = e;
            s += e;
        }
        const vf sb = (vf){0} + s;
        for (long j = 0; j < cv; j += VL) {
            vf v;
            memcpy(&v, yi + j, sizeof v);
            v /= sb;
            memcpy(yi + j, &v, sizeof v);
        }
        for (long j = cv; j < cols; j++) yi[j] /= s;
    }
}
