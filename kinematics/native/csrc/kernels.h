/* Every function the kinematics native library exports, for each floating-point type: name_float and name_double.
   This is the library's C ABI (plain C, no Python): kinematics/native/signatures.py declares the same signatures to
   ctypes and tests/kinematics/native/test_native.py fails on any difference between the two. Each unit includes this header, so the
   compiler checks every definition against its declaration here.

   Arrays are passed as pointers to contiguous memory; kinematics.native checks each tensor's device, dtype and exact
   shape before it hands a pointer over. Index arrays are int64. */
#ifndef KINEMATICS_NATIVE_KERNELS_H
#define KINEMATICS_NATIVE_KERNELS_H

/* identity.c: the hash of the sources the library was built from (kinematics.native.build.source_hash) */
const char *kinematics_native_source_hash(void);

/* chain.c: the chain pass, the DLS step's products, the pose error, the closed-form backward passes */
void fk_jacobian_float(long dof, long n, const float *sine, const float *versine, const float *q, const float *local,
                       const float *revolute, const float *end, float *rot, float *pos, float *jac);
void gram_float(long dof, long n, const float *jac, const float *constant, float *work, float *out);
void jt_x_float(long dof, long n, const float *jac, const float *x, float *out);
void pose_error_float(long n, const float *tr, const float *tp, const float *r, const float *p, float *out,
                      float small_sin_sq, float near_pi_cos);
void pose_error_vjp_float(long n, const float *tr, const float *r, const float *grad, float *grad_tr, float *grad_r,
                          float small_sin_sq, float near_pi_cos);
void chain_vjp_float(long dof, long n, const float *rot, const float *jac, const float *grad_rot, const float *grad_pos,
                     const float *grad_jac, float *work, float *grad_q);
void fk_jacobian_double(long dof, long n, const double *sine, const double *versine, const double *q,
                        const double *local, const double *revolute, const double *end, double *rot, double *pos,
                        double *jac);
void gram_double(long dof, long n, const double *jac, const double *constant, double *work, double *out);
void jt_x_double(long dof, long n, const double *jac, const double *x, double *out);
void pose_error_double(long n, const double *tr, const double *tp, const double *r, const double *p, double *out,
                       double small_sin_sq, double near_pi_cos);
void pose_error_vjp_double(long n, const double *tr, const double *r, const double *grad, double *grad_tr,
                           double *grad_r, double small_sin_sq, double near_pi_cos);
void chain_vjp_double(long dof, long n, const double *rot, const double *jac, const double *grad_rot,
                      const double *grad_pos, const double *grad_jac, double *work, double *grad_q);

/* fused_ik.c: the fused DLS solve and its backward; they return 0 (ik_solve_evaluate: its count of rows with
   invalid inputs), or -1 where their scratch could not be allocated */
long ik_solve_float(long dof, long n, long threads, long iterations, long clamp, const float *params, const float *q0,
                    const float *target_rot, const float *target_pos, const float *local, const float *revolute,
                    const float *end, const float *C, const float *lower, const float *upper, float *out);
long ik_solve_evaluate_float(long dof, long n, long threads, long iterations, long clamp, const float *params,
                             const float *target, const float *seed, const float *local, const float *revolute,
                             const float *end, const float *C, const float *lower, const float *upper, float *q_out,
                             float *errors, float *norms, unsigned char *flags, float *iterates);
long ik_solve_vjp_float(long dof, long n, long threads, long iterations, long clamp, const float *params,
                        const float *iterates, const float *target, const float *local, const float *revolute,
                        const float *end, const float *C, const float *lower, const float *upper, const float *grad,
                        const float *grad_err, float *grad_q0, float *grad_target);
long ik_solve_double(long dof, long n, long threads, long iterations, long clamp, const double *params,
                     const double *q0, const double *target_rot, const double *target_pos, const double *local,
                     const double *revolute, const double *end, const double *C, const double *lower,
                     const double *upper, double *out);
long ik_solve_evaluate_double(long dof, long n, long threads, long iterations, long clamp, const double *params,
                              const double *target, const double *seed, const double *local, const double *revolute,
                              const double *end, const double *C, const double *lower, const double *upper,
                              double *q_out, double *errors, double *norms, unsigned char *flags, double *iterates);
long ik_solve_vjp_double(long dof, long n, long threads, long iterations, long clamp, const double *params,
                         const double *iterates, const double *target, const double *local, const double *revolute,
                         const double *end, const double *C, const double *lower, const double *upper,
                         const double *grad, const double *grad_err, double *grad_q0, double *grad_target);

/* tree.c: KinematicTree's kernels */
void tree_nodes_float(long m, long n, long floating, long nq, const float *q, const float *origin,
                      const float *revolute, const float *multiplier, const float *offset, const long long *column,
                      const long long *parent, float *nodes);
void tree_frames_float(long nf, long n, long sb, long sf, long se, long rows, const float *nodes, const float *offset,
                       const long long *slot, float *out);
void tree_frame_jacobian_float(long k, long n, long slot, long nv, long base_nv, long sb, long se, const float *nodes,
                               const float *offset, const long long *ancestors, const long long *dofs,
                               const float *weights, const float *revolute, float *work, float *out);
void tree_com_float(long m, long n, long nv, long base_nv, long sb, long se, long csb, long cse, const float *nodes,
                    const float *moment, const float *subtree_mass, const float *revolute, const float *weights,
                    const float *total, const long long *dof, const long long *parent, float *work, float *com,
                    float *jac);
void tree_nodes_double(long m, long n, long floating, long nq, const double *q, const double *origin,
                       const double *revolute, const double *multiplier, const double *offset, const long long *column,
                       const long long *parent, double *nodes);
void tree_frames_double(long nf, long n, long sb, long sf, long se, long rows, const double *nodes,
                        const double *offset, const long long *slot, double *out);
void tree_frame_jacobian_double(long k, long n, long slot, long nv, long base_nv, long sb, long se, const double *nodes,
                                const double *offset, const long long *ancestors, const long long *dofs,
                                const double *weights, const double *revolute, double *work, double *out);
void tree_com_double(long m, long n, long nv, long base_nv, long sb, long se, long csb, long cse, const double *nodes,
                     const double *moment, const double *subtree_mass, const double *revolute, const double *weights,
                     const double *total, const long long *dof, const long long *parent, double *work, double *com,
                     double *jac);

/* hull.c: the support polygon's hull edges where the soles are posed, and their gradient */
void support_edges_float(long n, long s, long k, long p, const float *T, const float *corners, const long *owner,
                         const long *first, const long *second, float *normal, float *offset, unsigned char *edge);
void support_edges_double(long n, long s, long k, long p, const double *T, const double *corners, const long *owner,
                          const long *first, const long *second, double *normal, double *offset,
                          unsigned char *edge);
long support_edges_vjp_float(long n, long s, long k, long p, const float *T, const float *corners, const long *owner,
                             const long *first, const long *second, const float *grad_normal, const float *grad_offset,
                             float *grad_T);
long support_edges_vjp_double(long n, long s, long k, long p, const double *T, const double *corners,
                              const long *owner, const long *first, const long *second, const double *grad_normal,
                              const double *grad_offset, double *grad_T);

/* qp_ipm.c: solve_qp's interior point */
void qp_ipm_float(long nb, long threads, long n, long me, long mi, long iterations, long p_stride, const float *params,
                  const float *P_, const float *q_, const float *A_, const float *b_, const float *G_, const float *h_,
                  const float *lb_, const float *ub_, float *x_, float *y_, float *z_, float *s_, float *zu_,
                  float *su_, float *zl_, float *sl_);
void qp_ipm_double(long nb, long threads, long n, long me, long mi, long iterations, long p_stride,
                   const double *params, const double *P_, const double *q_, const double *A_, const double *b_,
                   const double *G_, const double *h_, const double *lb_, const double *ub_, double *x_, double *y_,
                   double *z_, double *s_, double *zu_, double *su_, double *zl_, double *sl_);

/* qp_active_set.c: solve_qp's active-set polish and its adjoint (qp_adjoint returns 0, or -1 without scratch) */
void qp_polish_float(long nb, long threads, long n, long me, long mi, long steps, long refinements, long p_stride,
                     const float *params, const float *P_, const float *q_, const float *A_, const float *b_,
                     const float *G_, const float *h_, const float *lb_, const float *ub_, const float *z_,
                     const float *s_, const float *zu_, const float *su_, const float *zl_, const float *sl_,
                     float *sol_, float *w_, float *flags_, float *rows_);
void qp_polish_structured_float(long nb, long threads, long n, long me, long mi, long steps, long refinements,
                               long r, const float *params, const float *p_, const float *U_, const float *q_,
                               const float *A_, const float *b_, const float *G_, const float *h_, const float *lb_,
                               const float *ub_, const float *z_, const float *s_, const float *zu_, const float *su_,
                               const float *zl_, const float *sl_, float *sol_, float *w_, float *flags_, float *rows_);
long qp_adjoint_float(long nb, long threads, long n, long me, long mi, long refinements, long p_stride,
                      const float *params, const float *P_, const float *A_, const float *G_, const float *flags_,
                      const float *exact_, const float *g_, float *ls_, float *lx_, float *ly_, float *lz_);
long qp_adjoint_structured_float(long nb, long threads, long n, long me, long mi, long refinements, long r,
                                 const float *params, const float *p_, const float *U_, const float *A_,
                                 const float *G_, const float *flags_, const float *exact_, const float *g_,
                                 float *ls_, float *lx_, float *ly_, float *lz_);
void qp_polish_double(long nb, long threads, long n, long me, long mi, long steps, long refinements, long p_stride,
                      const double *params, const double *P_, const double *q_, const double *A_, const double *b_,
                      const double *G_, const double *h_, const double *lb_, const double *ub_, const double *z_,
                      const double *s_, const double *zu_, const double *su_, const double *zl_, const double *sl_,
                      double *sol_, double *w_, double *flags_, double *rows_);
void qp_polish_structured_double(long nb, long threads, long n, long me, long mi, long steps, long refinements,
                               long r, const double *params, const double *p_, const double *U_, const double *q_,
                               const double *A_, const double *b_, const double *G_, const double *h_, const double *lb_,
                               const double *ub_, const double *z_, const double *s_, const double *zu_, const double *su_,
                               const double *zl_, const double *sl_, double *sol_, double *w_, double *flags_, double *rows_);
long qp_adjoint_double(long nb, long threads, long n, long me, long mi, long refinements, long p_stride,
                       const double *params, const double *P_, const double *A_, const double *G_, const double *flags_,
                       const double *exact_, const double *g_, double *ls_, double *lx_, double *ly_, double *lz_);
long qp_adjoint_structured_double(long nb, long threads, long n, long me, long mi, long refinements, long r,
                                  const double *params, const double *p_, const double *U_, const double *A_,
                                  const double *G_, const double *flags_, const double *exact_, const double *g_,
                                  double *ls_, double *lx_, double *ly_, double *lz_);

/* wholebody_step.c: `steps` cascade steps of the whole-body layer (kinematics.wholebody.step_kernel) and, where
   residuals is not NULL, the evaluation at the last configuration, where saved is not NULL what the last step's
   backward reads; wholebody_backward.c: that backward w.r.t. the tasks' targets and, where grad_q is not NULL, the
   configuration q. Each returns 0, or -1 where its scratch could not be allocated */
long wholebody_step_float(long n, long threads, long steps, const long long *plan, const double *settings,
                          const void *const *arrays, const void *const *targets, const long long *strides,
                          const float *q, float *q_next, float *dq, signed char *status,
                          unsigned char *active_in, signed char *active_bounds, float *residuals, float *violations,
                          double *saved);
long wholebody_step_backward_float(long n, long threads, const long long *plan, const double *settings,
                                   const void *const *arrays, const void *const *targets, const long long *strides,
                                   const float *q, const float *dq, const double *saved, const signed char *status,
                                   const float *grad_q_next, const float *grad_dq, void *const *grad_targets,
                                   const long long *target_sizes, float *grad_q);
long wholebody_step_double(long n, long threads, long steps, const long long *plan, const double *settings,
                           const void *const *arrays, const void *const *targets, const long long *strides,
                           const double *q, double *q_next, double *dq, signed char *status,
                           unsigned char *active_in, signed char *active_bounds, double *residuals,
                           double *violations, double *saved);
long wholebody_step_backward_double(long n, long threads, const long long *plan, const double *settings,
                                    const void *const *arrays, const void *const *targets, const long long *strides,
                                    const double *q, const double *dq, const double *saved, const signed char *status,
                                    const double *grad_q_next, const double *grad_dq, void *const *grad_targets,
                                    const long long *target_sizes, double *grad_q);

#endif
