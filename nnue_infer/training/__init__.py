"""Making networks: training data generation, the distillation trainer, cross-checks and plots.

* :mod:`~nnue_infer.training.datagen`: positions from games, playouts and perturbations, labelled
  by a teacher network through the inference core; :mod:`~nnue_infer.training.walk`: its episodes in
  compiled code (python-chess's rules through the compiled move generator);
* :mod:`~nnue_infer.training.train`: the reference PyTorch trainer (the ``train`` extra) and its float model;
* :mod:`~nnue_infer.training.fast` and :mod:`~nnue_infer.training.sparse_ft`: the fast trainer (the sparse
  feature transformer's forward and backward in Numba kernels);
* :mod:`~nnue_infer.training.sparse_sums`: the reference trainer's embedding-bag sums and their gradient
  (Numba kernels);
* :mod:`~nnue_infer.training.feature_indices`: active feature indices of many positions, numbered as
  nnue-pytorch's data loader numbers them (CSR);
* :mod:`~nnue_infer.training.distil`: the default network's recipe and its accuracy figures;
* :mod:`~nnue_infer.training.crosscheck`: a float network against its quantised form;
* :mod:`~nnue_infer.training.plotting`: matplotlib (the ``plot`` extra), imported lazily.

A user who only evaluates never imports this package (nor PyTorch).  Imports run one way: this
package imports the core and, through public functions, :mod:`nnue_infer.io`; neither imports it.
"""
